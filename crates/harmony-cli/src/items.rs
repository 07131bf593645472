//! The item sets of heavy-hitter devices, shared by `harmony simulate --task heavy-hitters` and
//! `harmony submit`: one item per row of a CSV column, the `attribute=value` items of each row
//! (`--column '*'`), or one set per line of a transactions file.
//!
//! Transactions file: UTF-8 text, one user per line, the user's items separated by
//! `--separator` (default `,`); items are trimmed, empty items dropped, duplicates within a line
//! counted once; a blank line is a user with an empty set. A file with no item at all is an
//! error.

use crate::population::Population;
use anyhow::{Context, Result, anyhow, bail};
use std::collections::HashMap;
use std::path::Path;

/// Users as sets of interned items (CSR layout), with the item names.
pub struct Sets {
    /// Item names, by item index.
    pub names: Vec<String>,
    /// offsets[i]..offsets[i + 1] indexes user i's items in `items`.
    pub offsets: Vec<usize>,
    /// The users' item indices.
    pub items: Vec<u32>,
    /// What the items are (for the output).
    pub source: String,
}

impl Sets {
    /// Users.
    pub fn n(&self) -> usize {
        self.offsets.len() - 1
    }
    /// User i's items.
    pub fn user(&self, i: usize) -> &[u32] {
        &self.items[self.offsets[i]..self.offsets[i + 1]]
    }
}

/// Interns item names.
#[derive(Default)]
struct Interner {
    ids: HashMap<String, u32>,
    names: Vec<String>,
}

impl Interner {
    fn id(&mut self, name: &str) -> u32 {
        if let Some(&i) = self.ids.get(name) {
            return i;
        }
        let i = self.names.len() as u32;
        self.ids.insert(name.to_string(), i);
        self.names.push(name.to_string());
        i
    }
}

/// Users' item sets from a transactions file (one set per line, items separated by `sep`).
pub fn read_transactions(path: &Path, sep: char) -> Result<Sets> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading --transactions {}", path.display()))?;
    let mut int = Interner::default();
    let mut offsets = vec![0];
    let mut items = Vec::new();
    for line in text.lines() {
        let start = items.len();
        for it in line.split(sep).map(str::trim).filter(|s| !s.is_empty()) {
            let id = int.id(it);
            if !items[start..].contains(&id) {
                items.push(id);
            }
        }
        offsets.push(items.len());
    }
    if items.is_empty() {
        bail!(
            "--transactions {}: no items ({} lines), expected one set of items per line separated by '{sep}'",
            path.display(),
            offsets.len() - 1
        );
    }
    Ok(Sets { names: int.names, offsets, items, source: format!("transactions {}", path.display()) })
}

/// A fast non-cryptographic hasher for the interning maps (keys are data values, not
/// adversarial input to a long-running server).
#[derive(Default, Clone, Copy)]
struct FastHasher(u64);

impl std::hash::Hasher for FastHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut h = self.0;
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            h = (h.rotate_left(5) ^ u64::from_le_bytes(c.try_into().expect("8 bytes")))
                .wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        }
        for &b in chunks.remainder() {
            h = (h.rotate_left(5) ^ b as u64).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        }
        self.0 = h;
    }
    fn finish(&self) -> u64 {
        harmony_core::sampling::splitmix64(self.0)
    }
}

type FastMap<K, V> = HashMap<K, V, std::hash::BuildHasherDefault<FastHasher>>;

/// Users' item sets from CSV columns: one item (the value) per user for a column, or the
/// `attribute=value` items of the attributes `star` (the schema's) for `*`. Streams the CSV and
/// interns only the columns used (no table of strings).
pub fn read_columns(data_path: &Path, column: &str, star: Option<Vec<String>>) -> Result<Sets> {
    let data_name = data_path.display().to_string();
    let wanted = if column == "*" {
        Some(star.ok_or_else(|| anyhow!("--column '*' needs the schema's attributes"))?)
    } else {
        None
    };
    let mut rdr =
        csv::ReaderBuilder::new().has_headers(true).flexible(true).from_reader(crate::data::open_data(data_path)?);
    let header: Vec<String> =
        rdr.headers().context("reading the CSV header")?.iter().map(|s| s.trim().to_string()).collect();
    let cols: Vec<(usize, String)> = match &wanted {
        Some(attrs) => attrs
            .iter()
            .map(|a| {
                header
                    .iter()
                    .position(|h| h == a)
                    .map(|j| (j, a.clone()))
                    .ok_or_else(|| anyhow!("schema attribute \"{a}\" is not a column of {data_name}"))
            })
            .collect::<Result<_>>()?,
        None => {
            let j = header.iter().position(|h| h == column).ok_or_else(|| {
                anyhow!("--column \"{column}\" is not a column of {data_name}; columns: {}", header.join(", "))
            })?;
            vec![(j, String::new())]
        }
    };
    let mut maps: Vec<FastMap<Box<[u8]>, u32>> = vec![FastMap::default(); cols.len()];
    let mut names: Vec<String> = Vec::new();
    let mut offsets = vec![0usize];
    let mut items: Vec<u32> = Vec::new();
    let mut rec = csv::ByteRecord::new();
    let mut row = 1usize;
    while rdr.read_byte_record(&mut rec).with_context(|| format!("{data_name}: reading row {}", row + 1))? {
        row += 1;
        if rec.len() != header.len() {
            bail!(
                "{data_name}: row {row} has {} fields, expected {} (the header's column count)",
                rec.len(),
                header.len()
            );
        }
        for ((j, attr), map) in cols.iter().zip(maps.iter_mut()) {
            let v = rec[*j].trim_ascii();
            if v.is_empty() {
                continue;
            }
            let id = match map.get(v) {
                Some(&id) => id,
                None => {
                    let text = std::str::from_utf8(v)
                        .with_context(|| format!("{data_name}: row {row}, column {}: not UTF-8", header[*j]))?;
                    names.push(if attr.is_empty() { text.to_string() } else { format!("{attr}={text}") });
                    let id = (names.len() - 1) as u32;
                    map.insert(v.into(), id);
                    id
                }
            };
            items.push(id);
        }
        offsets.push(items.len());
    }
    let n = offsets.len() - 1;
    if n == 0 {
        bail!("{data_name}: no data rows");
    }
    if items.is_empty() {
        bail!("--column \"{column}\" of {data_name} is empty: no non-empty value in {n} rows");
    }
    let source = if column == "*" {
        format!("{} attributes as attribute=value items", cols.len())
    } else {
        format!("column {column}")
    };
    Ok(Sets { names, offsets, items, source })
}

impl Sets {
    /// The devices: user i holds the names of its items.
    pub fn population(&self) -> Population {
        Population::Items(
            (0..self.n()).map(|i| self.user(i).iter().map(|&t| self.names[t as usize].clone()).collect()).collect(),
        )
    }
}

/// Where heavy-hitter devices' items come from.
#[derive(Debug, Clone)]
pub enum Source {
    /// A CSV column (or `*`: every schema attribute as `attribute=value`).
    Column(String),
    /// A transactions file, with its separator.
    Transactions(std::path::PathBuf, char),
}

/// Reads the sets of a source: `data` is the CSV of a column; `star` the attributes of `*`.
pub fn read(source: &Source, data: &Path, star: Option<Vec<String>>) -> Result<Sets> {
    match source {
        Source::Column(c) => read_columns(data, c, star),
        Source::Transactions(p, sep) => read_transactions(p, *sep),
    }
}
