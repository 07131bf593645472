//! Per-connection guards of the accept loop: a write-progress timeout (a client that stops
//! reading its answers is disconnected instead of holding its connection and the kernel's
//! socket memory for ever) and a cap on the connections of one peer address.

use std::collections::HashMap;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

/// A stream whose writes must make progress: a write or flush that stays blocked for
/// `timeout` fails with `TimedOut`, and the connection closes.
pub struct WriteProgress<S> {
    inner: S,
    timeout: Duration,
    stalled: Option<Pin<Box<Sleep>>>,
}

impl<S> WriteProgress<S> {
    /// Wraps `inner`.
    pub fn new(inner: S, timeout: Duration) -> Self {
        WriteProgress { inner, timeout, stalled: None }
    }

    /// After the inner write returned `poll`: progress clears the timer; a blocked write starts
    /// it (once) and fails when it fires.
    fn watch<T>(&mut self, cx: &mut Context<'_>, poll: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        if poll.is_ready() {
            self.stalled = None;
            return poll;
        }
        let timeout = self.timeout;
        let timer = self.stalled.get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => {
                let msg = format!("no write progress for {timeout:?}: the client does not read its answers");
                Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, msg)))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for WriteProgress<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for WriteProgress<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.watch(cx, poll)
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.watch(cx, poll)
    }
    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let poll = Pin::new(&mut self.inner).poll_flush(cx);
        self.watch(cx, poll)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let poll = Pin::new(&mut self.inner).poll_shutdown(cx);
        self.watch(cx, poll)
    }
}

/// Open connections per peer address, capped.
#[derive(Clone, Default)]
pub struct Peers {
    open: Arc<Mutex<HashMap<IpAddr, usize>>>,
    cap: usize,
}

/// One admitted connection of a peer; dropping it frees its place.
pub struct PeerSlot {
    peers: Peers,
    ip: IpAddr,
}

impl Peers {
    /// At most `cap` connections per address (0: no cap).
    pub fn new(cap: usize) -> Self {
        Peers { open: Arc::default(), cap }
    }

    /// A place for one more connection of `ip`, or `None` when it has `cap` already.
    pub fn admit(&self, ip: IpAddr) -> Option<PeerSlot> {
        if self.cap == 0 {
            return Some(PeerSlot { peers: Peers::default(), ip });
        }
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let n = open.entry(ip).or_insert(0);
        if *n >= self.cap {
            return None;
        }
        *n += 1;
        Some(PeerSlot { peers: self.clone(), ip })
    }
}

impl Drop for PeerSlot {
    fn drop(&mut self) {
        if self.peers.cap == 0 {
            return;
        }
        let mut open = self.peers.open.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = open.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.ip);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peers_are_capped_and_freed() {
        let peers = Peers::new(2);
        let (a, b): (IpAddr, IpAddr) = ("127.0.0.1".parse().unwrap(), "127.0.0.2".parse().unwrap());
        let s1 = peers.admit(a).unwrap();
        let _s2 = peers.admit(a).unwrap();
        assert!(peers.admit(a).is_none(), "a third connection of one address");
        assert!(peers.admit(b).is_some(), "another address is not affected");
        drop(s1);
        assert!(peers.admit(a).is_some(), "a closed connection frees its place");
        assert!(Peers::new(0).admit(a).is_some());
    }
}
