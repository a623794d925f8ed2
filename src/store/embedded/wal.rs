//! The embedded store's write-ahead log: a file beside the database where
//! plain appends are made durable (one sequential write and one
//! `fdatasync` per group) before they are acknowledged. The database takes
//! them later, many groups in one transaction (see `pending`), and the log
//! starts over once that transaction is durable. A group commit of the
//! B-trees alone writes a few scattered pages per event, and on a virtual
//! disk syncing 114 scattered pages takes about 7 ms where syncing 38 KiB
//! written in one piece takes 0.4 ms (docs/BENCHMARKS.md).
//!
//! Two files take turns: appends go to one while the database takes the
//! other's records (`logged`), which then starts over. Each start writes a
//! generation number greater than any before it in the header, so that a
//! replay takes the older file's records first.
//!
//! Layout: a 24-byte header (`MAGIC`, a random seed, the generation, the
//! CRC-32 of the three), then records `[len u32][crc u32][seq u64][body]`. Each record's CRC
//! continues the one before it (the first continues the seed) over its
//! sequence number and body, and sequence numbers are never reused, not
//! even by a write that failed: bytes left behind a failed write, or by an
//! earlier generation of the log, never continue the chain. Reading stops
//! at the first record that does not: a torn tail is a write that was
//! never acknowledged.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::store::codec;
use crate::store::AppendBatch;

/// The file names of the log's two halves inside the data dir.
pub const WAL_FILES: [&str; 2] = ["projector-0.wal", "projector-1.wal"];
const MAGIC: &[u8; 8] = b"PJWAL\0v1";
const HEADER: u64 = 24;
/// Frame of a record before its body: length, CRC, sequence number.
const FRAME: usize = 16;

/// One logged append: the session, the epoch it continues, the batch.
#[derive(Debug, Clone)]
pub(super) struct Record {
    pub session: String,
    pub epoch: String,
    pub batch: AppendBatch,
}

/// The open log.
pub(super) struct Wal {
    file: File,
    path: PathBuf,
    /// Bytes that hold the header and acknowledged records.
    len: u64,
    /// The CRC the next record continues.
    chain: u32,
    /// The next record's sequence number.
    seq: u64,
    /// A write failed and the file could not be cut back to `len`.
    torn: bool,
    /// Starting over failed: the log must start over before it takes more.
    stale: bool,
    /// The header's generation (the one it is to have, while `stale`).
    gen: u64,
    buf: Vec<u8>,
}

impl Wal {
    /// Open or create both halves of the log in `dir`, with their records
    /// in the order they were written (older generation first).
    pub fn open_pair(dir: &Path) -> io::Result<([Wal; 2], Vec<Record>)> {
        let (a, mut ra) = Wal::open(dir, WAL_FILES[0])?;
        let (b, mut rb) = Wal::open(dir, WAL_FILES[1])?;
        if a.gen <= b.gen {
            ra.append(&mut rb);
            Ok(([a, b], ra))
        } else {
            rb.append(&mut ra);
            Ok(([a, b], rb))
        }
    }

    /// Open or create one half, with the records of its current
    /// generation (those that continue the chain, in order).
    pub fn open(dir: &Path, name: &str) -> io::Result<(Wal, Vec<Record>)> {
        let path = dir.join(name);
        let existed = path.exists();
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)?;
        if !existed {
            // The file's name must survive a crash as well as its bytes.
            File::open(dir)?.sync_all()?;
        }
        let mut wal = Wal {
            file,
            path,
            len: 0,
            chain: 0,
            seq: 0,
            torn: false,
            stale: false,
            gen: 0,
            buf: Vec::new(),
        };
        let mut raw = Vec::new();
        std::io::Read::read_to_end(&mut &wal.file, &mut raw)?;
        let records = match header(&raw) {
            Some((seed, gen)) => {
                wal.gen = gen;
                wal.read_records(&raw, seed)
            }
            None => {
                wal.reset(0)?;
                Vec::new()
            }
        };
        Ok((wal, records))
    }

    /// Walk the chain from the header; leaves `len`, `chain` and `seq` after
    /// the last record that continues it.
    fn read_records(&mut self, raw: &[u8], seed: u32) -> Vec<Record> {
        let (mut at, mut chain, mut out) = (HEADER as usize, seed, Vec::new());
        while let Some(frame) = raw.get(at..at + FRAME) {
            let len = u32::from_le_bytes(frame[0..4].try_into().unwrap_or_default()) as usize;
            let crc = u32::from_le_bytes(frame[4..8].try_into().unwrap_or_default());
            let Some(signed) = raw.get(at + 8..at + FRAME + len) else {
                break;
            };
            let mut h = crc32fast::Hasher::new_with_initial(chain);
            h.update(signed);
            if h.finalize() != crc {
                break;
            }
            let seq = u64::from_le_bytes(signed[0..8].try_into().unwrap_or_default());
            let Some(record) = decode(&signed[8..]) else {
                break;
            };
            out.push(record);
            (chain, self.seq) = (crc, seq + 1);
            at += FRAME + len;
        }
        (self.len, self.chain) = (at as u64, chain);
        out
    }

    /// Bytes of acknowledged records (and the header).
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Append the records and make them durable. On failure nothing of them
    /// counts: the file is cut back (or, failing that, the log is marked
    /// torn and refuses writes until [`Wal::repair`]).
    pub fn append<'a>(
        &mut self,
        records: impl Iterator<Item = (&'a str, &'a str, &'a AppendBatch)>,
    ) -> io::Result<()> {
        self.repair()?;
        self.buf.clear();
        let mut chain = self.chain;
        for (session, epoch, batch) in records {
            let start = self.buf.len();
            self.buf.extend_from_slice(&[0; 8]);
            self.buf.extend_from_slice(&self.seq.to_le_bytes());
            self.seq += 1;
            encode(&mut self.buf, session, epoch, batch);
            let len = (self.buf.len() - start - FRAME) as u32;
            let mut h = crc32fast::Hasher::new_with_initial(chain);
            h.update(&self.buf[start + 8..]);
            chain = h.finalize();
            self.buf[start..start + 4].copy_from_slice(&len.to_le_bytes());
            self.buf[start + 4..start + 8].copy_from_slice(&chain.to_le_bytes());
        }
        let written = self
            .file
            .write_all_at(&self.buf, self.len)
            .and_then(|()| self.file.sync_data());
        if let Err(e) = written {
            self.torn = true;
            let _ = self.repair();
            return Err(e);
        }
        self.len += self.buf.len() as u64;
        self.chain = chain;
        if self.buf.capacity() > 1 << 20 {
            self.buf = Vec::new();
        }
        Ok(())
    }

    /// Cut off what a failed write may have left, before the next write.
    pub fn repair(&mut self) -> io::Result<()> {
        if self.stale {
            return self.reset(self.gen);
        }
        if self.torn {
            self.file.set_len(self.len)?;
            self.torn = false;
        }
        Ok(())
    }

    /// Start a new generation, empty: called once the database holds every
    /// record durably. A crash before this is durable replays records the
    /// database already has, which replay skips.
    pub fn reset(&mut self, gen: u64) -> io::Result<()> {
        let seed = uuid::Uuid::new_v4().as_u128() as u32;
        let mut head = [0u8; HEADER as usize];
        head[..8].copy_from_slice(MAGIC);
        head[8..12].copy_from_slice(&seed.to_le_bytes());
        head[12..20].copy_from_slice(&gen.to_le_bytes());
        let crc = crc32fast::hash(&head[..20]);
        head[20..].copy_from_slice(&crc.to_le_bytes());
        (self.stale, self.gen) = (true, gen);
        self.file.set_len(0)?;
        self.file.write_all_at(&head, 0)?;
        self.file.sync_data()?;
        (self.len, self.chain, self.torn, self.stale) = (HEADER, seed, false, false);
        Ok(())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The header's generation.
    pub fn gen(&self) -> u64 {
        self.gen
    }
}

/// The seed and generation of a valid header.
fn header(raw: &[u8]) -> Option<(u32, u64)> {
    let head = raw.get(..HEADER as usize)?;
    let crc = u32::from_le_bytes(head[20..24].try_into().ok()?);
    (head[..8] == MAGIC[..] && crc32fast::hash(&head[..20]) == crc).then(|| {
        (
            u32::from_le_bytes(head[8..12].try_into().unwrap_or_default()),
            u64::from_le_bytes(head[12..20].try_into().unwrap_or_default()),
        )
    })
}

fn put_str(buf: &mut Vec<u8>, s: &str) {
    buf.extend_from_slice(&(s.len() as u32).to_le_bytes());
    buf.extend_from_slice(s.as_bytes());
}

/// `[session][epoch][listing: 0 | 1 str][claim u8][n u32][(cursor u64, len u32, event)*]
/// [checkpoint: 0 | 1 (len u32, checkpoint)]`, strings as `[len u32][bytes]`, events as
/// [`codec::encode_event`], checkpoints as [`codec::encode_checkpoint`].
fn encode(buf: &mut Vec<u8>, session: &str, epoch: &str, batch: &AppendBatch) {
    put_str(buf, session);
    put_str(buf, epoch);
    match &batch.listing {
        Some(l) => {
            buf.push(1);
            put_str(buf, l);
        }
        None => buf.push(0),
    }
    buf.push(batch.claim as u8);
    buf.extend_from_slice(&(batch.events.len() as u32).to_le_bytes());
    for e in &batch.events {
        let raw = codec::encode_event(e);
        buf.extend_from_slice(&e.cursor.to_le_bytes());
        buf.extend_from_slice(&(raw.len() as u32).to_le_bytes());
        buf.extend_from_slice(&raw);
    }
    match &batch.checkpoint {
        Some(cp) => {
            let raw = codec::encode_checkpoint(cp);
            buf.push(1);
            buf.extend_from_slice(&(raw.len() as u32).to_le_bytes());
            buf.extend_from_slice(&raw);
        }
        None => buf.push(0),
    }
}

/// Reads `[len u32][bytes]` pieces off the front of a record's body.
struct Take<'a>(&'a [u8]);

impl<'a> Take<'a> {
    fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = (self.0.get(..n)?, self.0.get(n..)?);
        self.0 = rest;
        Some(head)
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.bytes(4)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.bytes(8)?.try_into().ok()?))
    }
    fn str(&mut self) -> Option<String> {
        let n = self.u32()? as usize;
        String::from_utf8(self.bytes(n)?.to_vec()).ok()
    }
}

fn decode(body: &[u8]) -> Option<Record> {
    let mut t = Take(body);
    let (session, epoch) = (t.str()?, t.str()?);
    let listing = match t.bytes(1)?[0] {
        0 => None,
        _ => Some(t.str()?),
    };
    let claim = t.bytes(1)?[0] != 0;
    let n = t.u32()?;
    let mut events = Vec::with_capacity(n.min(4096) as usize);
    for _ in 0..n {
        let cursor = t.u64()?;
        let len = t.u32()? as usize;
        events.push(codec::decode_event(&session, cursor, t.bytes(len)?).ok()?);
    }
    let checkpoint = match t.bytes(1)?[0] {
        0 => None,
        _ => {
            let len = t.u32()? as usize;
            Some(codec::decode_checkpoint(&session, t.bytes(len)?).ok()?)
        }
    };
    Some(Record {
        session,
        batch: AppendBatch {
            epoch: epoch.clone(),
            events,
            checkpoint,
            listing,
            claim,
        },
        epoch,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::contract::{batch, ev};

    #[test]
    fn bytes_a_failed_write_left_never_continue_the_chain() {
        let dir = std::env::temp_dir().join(format!(
            "projector-wal-chain-{}",
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join(WAL_FILES[0]);
        let (b1, b2) = (batch(vec![ev(1)], None), batch(vec![ev(2)], None));
        let (mut wal, none) = Wal::open(&dir, WAL_FILES[0]).unwrap();
        assert!(none.is_empty());
        let (len, chain) = (wal.len, wal.chain);
        wal.append([("s", "e", &b1), ("s", "e", &b2)].into_iter())
            .unwrap();
        let two = std::fs::read(&file).unwrap();
        // As if the sync of that write had failed: the log cuts back and
        // writes the first record again, with the next sequence number.
        (wal.len, wal.chain, wal.torn) = (len, chain, true);
        wal.append([("s", "e", &b1)].into_iter()).unwrap();
        let one = std::fs::read(&file).unwrap();
        assert_ne!(one[..], two[..one.len()], "a new sequence number");
        // A crash that left the failed write's second record behind it.
        let mut stale = one.clone();
        stale.extend_from_slice(&two[one.len()..]);
        std::fs::write(&file, &stale).unwrap();
        let (_, read) = Wal::open(&dir, WAL_FILES[0]).unwrap();
        assert_eq!(read.len(), 1);
        assert_eq!(read[0].batch.events[0].cursor, 1);
        // The bytes as first written read back whole.
        std::fs::write(&file, &two).unwrap();
        let (_, read) = Wal::open(&dir, WAL_FILES[0]).unwrap();
        let cursors: Vec<u64> = read.iter().map(|r| r.batch.events[0].cursor).collect();
        assert_eq!(cursors, [1, 2]);
        let _ = std::fs::remove_dir_all(dir);
    }
}
