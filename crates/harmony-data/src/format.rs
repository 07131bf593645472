//! Which format a data file is in (magic bytes first, the name's extension second), and a
//! streaming xz decoder.

use crate::error::{Error, Result};
use std::io::{self, Read};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::JoinHandle;

/// A table format `--data` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Comma-separated text with a header row.
    Csv,
    /// CSV compressed with xz.
    CsvXz,
    /// Apache Parquet.
    Parquet,
    /// Arrow IPC file (Feather v2).
    ArrowFile,
    /// Arrow IPC stream.
    ArrowStream,
}

impl Format {
    /// The format's name, for messages.
    pub fn name(self) -> &'static str {
        match self {
            Format::Csv => "CSV",
            Format::CsvXz => "CSV (xz)",
            Format::Parquet => "Parquet",
            Format::ArrowFile => "Arrow IPC file",
            Format::ArrowStream => "Arrow IPC stream",
        }
    }
}

/// Bytes to read for [`sniff`].
pub const SNIFF_LEN: usize = 8;

/// The format of a file starting with `head` (up to [`SNIFF_LEN`] bytes) and called `name`:
/// magic bytes decide (`PAR1`, `ARROW1`, an IPC continuation marker, xz's magic); the extension
/// only for text, or to explain why a file named `.parquet`/`.arrow` is not one.
pub fn sniff(head: &[u8], name: &str) -> Result<Format> {
    const XZ: &[u8] = &[0xFD, b'7', b'z', b'X', b'Z', 0];
    if head.starts_with(b"PAR1") {
        return Ok(Format::Parquet);
    }
    if head.starts_with(b"ARROW1") {
        return Ok(Format::ArrowFile);
    }
    if head.starts_with(&[0xFF; 4]) {
        return Ok(Format::ArrowStream);
    }
    if head.starts_with(XZ) {
        return Ok(Format::CsvXz);
    }
    let unsupported = |what: &str| Err(Error::data(format!("{name}: {what}")));
    if head.starts_with(&[0x1F, 0x8B]) {
        return unsupported("gzip-compressed data is not supported: decompress it, or compress with xz (.csv.xz)");
    }
    if head.starts_with(b"FEA1") {
        return unsupported("Feather v1 is not supported: save it as Feather v2 (an Arrow IPC file)");
    }
    let ext = name.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase()).unwrap_or_default();
    match ext.as_str() {
        "parquet" | "pq" => {
            unsupported("named as Parquet but does not start with \"PAR1\": not a Parquet file, or truncated")
        }
        "arrow" | "feather" | "ipc" | "arrows" => {
            unsupported("named as Arrow IPC but starts with neither \"ARROW1\" nor a stream's 0xFFFFFFFF marker")
        }
        "xz" => unsupported("named as xz but does not start with xz's magic bytes: not an xz file"),
        _ => Ok(Format::Csv),
    }
}

/// Reads up to [`SNIFF_LEN`] bytes (fewer only at the end of the input).
pub fn read_head(r: &mut impl Read) -> io::Result<Vec<u8>> {
    let mut head = vec![0; SNIFF_LEN];
    let mut filled = 0;
    while filled < SNIFF_LEN {
        match r.read(&mut head[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    head.truncate(filled);
    Ok(head)
}

/// Decompresses xz on its own thread, in 256 KiB chunks through a bounded channel: the
/// decompressed text is never held whole, and decoding overlaps parsing (two cores).
pub struct XzReader {
    chunks: Receiver<Vec<u8>>,
    current: Vec<u8>,
    pos: usize,
    decoder: Option<JoinHandle<Result<(), String>>>,
}

/// The decoder thread's sink: fills a chunk, sends it when full.
struct ChunkWriter {
    tx: SyncSender<Vec<u8>>,
    buf: Vec<u8>,
}

const CHUNK: usize = 256 << 10;

impl io::Write for ChunkWriter {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let n = data.len().min(CHUNK - self.buf.len());
        self.buf.extend_from_slice(&data[..n]);
        if self.buf.len() == CHUNK {
            self.flush()?;
        }
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let full = std::mem::replace(&mut self.buf, Vec::with_capacity(CHUNK));
        // The reader was dropped (the parse stopped early): stop decoding.
        self.tx.send(full).map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "reader closed"))
    }
}

impl XzReader {
    /// Starts decoding `input` (xz) on a new thread.
    pub fn new(input: Box<dyn Read + Send>) -> Self {
        let (tx, rx) = sync_channel(4);
        let decoder = std::thread::spawn(move || {
            let mut input = io::BufReader::with_capacity(1 << 20, input);
            let mut out = ChunkWriter { tx, buf: Vec::with_capacity(CHUNK) };
            let result = lzma_rs::xz_decompress(&mut input, &mut out)
                .and_then(|()| io::Write::flush(&mut out).map_err(lzma_rs::error::Error::IoError));
            match result {
                Ok(()) => Ok(()),
                Err(lzma_rs::error::Error::IoError(e)) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
                Err(e) => Err(format!("not a valid xz file ({e})")),
            }
        });
        XzReader { chunks: rx, current: Vec::new(), pos: 0, decoder: Some(decoder) }
    }
}

impl Read for XzReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.pos == self.current.len() {
            match self.chunks.recv() {
                Ok(chunk) => (self.current, self.pos) = (chunk, 0),
                Err(_) => {
                    // The decoder finished: report its error, if any, once.
                    return match self.decoder.take().map(JoinHandle::join) {
                        Some(Ok(Err(e))) => Err(io::Error::new(io::ErrorKind::InvalidData, e)),
                        Some(Err(_)) => Err(io::Error::other("the xz decoder thread panicked")),
                        _ => Ok(0),
                    };
                }
            }
        }
        let n = buf.len().min(self.current.len() - self.pos);
        buf[..n].copy_from_slice(&self.current[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn magic_first_extension_second() {
        assert_eq!(sniff(b"PAR1\x15\x00", "x.csv").unwrap(), Format::Parquet);
        assert_eq!(sniff(b"ARROW1\0\0", "x").unwrap(), Format::ArrowFile);
        assert_eq!(sniff(&[0xFF, 0xFF, 0xFF, 0xFF, 8, 0], "x.arrows").unwrap(), Format::ArrowStream);
        assert_eq!(sniff(&[0xFD, b'7', b'z', b'X', b'Z', 0], "x.csv").unwrap(), Format::CsvXz);
        assert_eq!(sniff(b"a,b\n1,2", "x.txt").unwrap(), Format::Csv);
        assert_eq!(sniff(b"", "empty.csv").unwrap(), Format::Csv);
        let e = sniff(b"a,b\n1,2", "x.parquet").unwrap_err().to_string();
        assert!(e.contains("x.parquet") && e.contains("PAR1"), "{e}");
        assert!(sniff(b"a,b\n", "x.Feather").unwrap_err().to_string().contains("Arrow IPC"));
        assert!(sniff(&[0x1F, 0x8B, 8], "x.csv.gz").unwrap_err().to_string().contains("gzip"));
    }

    #[test]
    fn xz_streams_and_reports_corruption() {
        let text: Vec<u8> = (0..200_000u32).flat_map(|i| format!("{i},{}\n", i % 7).into_bytes()).collect();
        let mut xz = Vec::new();
        lzma_rs::xz_compress(&mut &text[..], &mut xz).unwrap();
        let mut out = Vec::new();
        XzReader::new(Box::new(io::Cursor::new(xz.clone()))).read_to_end(&mut out).unwrap();
        assert_eq!(out, text);
        let bad = xz[..xz.len() / 2].to_vec();
        let e = XzReader::new(Box::new(io::Cursor::new(bad))).read_to_end(&mut Vec::new()).unwrap_err();
        assert!(e.to_string().contains("not a valid xz file"), "{e}");
        // Dropping the reader early stops the decoder instead of blocking it.
        let mut early = XzReader::new(Box::new(io::Cursor::new(xz)));
        let mut first = [0; 10];
        early.read_exact(&mut first).unwrap();
        drop(early);
    }
}
