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
//! never acknowledged, and the zeros the file grows by (`GROW`) end it too.

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
/// The file grows this much at a time, as zeros, with the group that
/// needs it: a group written within the file's size changes no metadata,
/// so its `fdatasync` writes the group's pages alone, not the inode and
/// the block bitmap besides (a quarter less time per group commit on ext4
/// here, docs/BENCHMARKS.md).
const GROW: u64 = 256 << 10;
/// The most of its file a half keeps when it starts over.
const KEEP: u64 = 4 << 20;
/// Zeros to grow the file with.
static ZEROS: [u8; 64 << 10] = [0; 64 << 10];

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
    /// Bytes of the file: past `len`, zeros or bytes that never continue
    /// the chain (a failed write's, an earlier generation's).
    size: u64,
    /// The header's seed: the CRC the first record continues.
    seed: u32,
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
            size: 0,
            seed: 0,
            chain: 0,
            seq: 0,
            torn: false,
            stale: false,
            gen: 0,
            buf: Vec::new(),
        };
        let mut raw = Vec::new();
        std::io::Read::read_to_end(&mut &wal.file, &mut raw)?;
        wal.size = raw.len() as u64;
        let records = match header(&raw) {
            Some((seed, gen)) => {
                (wal.gen, wal.seed) = (gen, seed);
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
        let (records, at, chain, seq) = walk(raw, seed);
        (self.len, self.chain) = (at as u64, chain);
        self.seq = seq.unwrap_or(self.seq);
        records
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
            .grow(self.len + self.buf.len() as u64)
            .and_then(|()| self.file.write_all_at(&self.buf, self.len))
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

    /// Grow the file with zeros (unsynced: the write that needs them
    /// syncs them) until it holds `end` bytes, by `GROW` at a time.
    fn grow(&mut self, end: u64) -> io::Result<()> {
        if end <= self.size {
            return Ok(());
        }
        let to = end.div_ceil(GROW) * GROW;
        while self.size < to {
            let n = (to - self.size).min(ZEROS.len() as u64);
            self.file.write_all_at(&ZEROS[..n as usize], self.size)?;
            self.size += n;
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
            (self.size, self.torn) = (self.len, false);
        }
        Ok(())
    }

    /// [`Wal::reset`], with a failure said in the log: whether it started
    /// over. A half that could not keeps what it held (records the
    /// database has, which a replay skips) and refuses writes until it
    /// starts over.
    pub fn start_over(&mut self, gen: u64) -> bool {
        let e = match self.reset(gen) {
            Ok(()) => return true,
            Err(e) => e,
        };
        tracing::error!(path = %self.path().display(), error = %e, "write-ahead log could not start over");
        false
    }

    /// Start a new generation, empty: called once the database holds every
    /// record durably. A crash before this is durable replays records the
    /// database already has, which replay skips.
    pub fn reset(&mut self, gen: u64) -> io::Result<()> {
        // Not the seed before: the generation before's first record,
        // still in the file, continues that one.
        let mut seed = self.seed;
        while seed == self.seed {
            seed = uuid::Uuid::new_v4().as_u128() as u32;
        }
        let mut head = [0u8; HEADER as usize];
        head[..8].copy_from_slice(MAGIC);
        head[8..12].copy_from_slice(&seed.to_le_bytes());
        head[12..20].copy_from_slice(&gen.to_le_bytes());
        let crc = crc32fast::hash(&head[..20]);
        head[20..].copy_from_slice(&crc.to_le_bytes());
        (self.stale, self.gen) = (true, gen);
        // The records of the generation before stay where they are: they
        // continue the old seed's chain, not the new one's.
        if self.size > KEEP {
            self.file.set_len(KEEP)?;
            self.size = KEEP;
        }
        self.file.write_all_at(&head, 0)?;
        self.size = self.size.max(HEADER);
        self.file.sync_data()?;
        (self.len, self.seed, self.chain) = (HEADER, seed, seed);
        (self.torn, self.stale) = (false, false);
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

/// The records of a log file's bytes that continue the chain from `seed`,
/// the offset past the last of them, the CRC the next continues and the
/// next one's sequence number (`None` with no record).
fn walk(raw: &[u8], seed: u32) -> (Vec<Record>, usize, u32, Option<u64>) {
    let (mut at, mut chain, mut out, mut next) = (HEADER as usize, seed, Vec::new(), None);
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
        (chain, next) = (crc, Some(seq + 1));
        at += FRAME + len;
    }
    (out, at, chain, next)
}

/// Bytes of records in the log file at `path`.
#[cfg(test)]
pub(super) fn logged_len(path: &Path) -> u64 {
    let raw = std::fs::read(path).unwrap_or_default();
    header(&raw).map_or(0, |(seed, _)| walk(&raw, seed).1 as u64 - HEADER)
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
        buf.extend_from_slice(&e.cursor.to_le_bytes());
        let at = buf.len();
        buf.extend_from_slice(&[0; 4]);
        codec::encode_event(buf, e);
        let len = (buf.len() - at - 4) as u32;
        buf[at..at + 4].copy_from_slice(&len.to_le_bytes());
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

    /// A new directory for a test's log, and the path of its first half.
    fn tmpdir(name: &str) -> (PathBuf, PathBuf) {
        let dir = std::env::temp_dir().join(format!(
            "projector-wal-{name}-{}",
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join(WAL_FILES[0]);
        (dir, file)
    }

    #[test]
    fn bytes_a_failed_write_left_never_continue_the_chain() {
        let (dir, file) = tmpdir("chain");
        let (b1, b2) = (batch(vec![ev(1)], None), batch(vec![ev(2)], None));
        let (mut wal, none) = Wal::open(&dir, WAL_FILES[0]).unwrap();
        assert!(none.is_empty());
        let (len, chain) = (wal.len, wal.chain);
        wal.append([("s", "e", &b1), ("s", "e", &b2)].into_iter())
            .unwrap();
        let two = std::fs::read(&file).unwrap()[..wal.len as usize].to_vec();
        // As if the sync of that write had failed: the log cuts back and
        // writes the first record again, with the next sequence number.
        (wal.len, wal.chain, wal.torn) = (len, chain, true);
        wal.append([("s", "e", &b1)].into_iter()).unwrap();
        let one = std::fs::read(&file).unwrap()[..wal.len as usize].to_vec();
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

    #[test]
    fn the_file_grows_ahead_of_the_records_and_a_new_generation_keeps_it() {
        let (dir, file) = tmpdir("grow");
        let size = || std::fs::metadata(&file).unwrap().len();
        let (b1, b2) = (batch(vec![ev(1)], None), batch(vec![ev(2)], None));
        let (mut wal, _) = Wal::open(&dir, WAL_FILES[0]).unwrap();
        wal.append([("s", "e", &b1), ("s", "e", &b2)].into_iter())
            .unwrap();
        assert_eq!(size(), GROW, "grown ahead, as zeros");
        assert_eq!(logged_len(&file), wal.len - HEADER);
        let (_, read) = Wal::open(&dir, WAL_FILES[0]).unwrap();
        assert_eq!(read.len(), 2, "the zeros end the records");
        // Starting over keeps the file, and the old generation's records
        // behind the new one's never continue its chain.
        wal.reset(1).unwrap();
        assert_eq!(size(), GROW);
        assert!(Wal::open(&dir, WAL_FILES[0]).unwrap().1.is_empty());
        wal.append([("s", "e", &b2)].into_iter()).unwrap();
        assert_eq!(size(), GROW);
        let (again, read) = Wal::open(&dir, WAL_FILES[0]).unwrap();
        assert_eq!(again.gen, 1);
        assert_eq!(read.len(), 1);
        assert_eq!(read[0].batch.events[0].cursor, 2);
        // Records past what the file holds grow it by whole steps.
        let big = batch((3..3 + 4_000).map(ev).collect::<Vec<_>>(), None);
        let mut records = 1;
        while wal.len <= GROW {
            wal.append([("s", "e", &big)].into_iter()).unwrap();
            records += 1;
        }
        assert_eq!(size(), wal.len.div_ceil(GROW) * GROW);
        assert_eq!(Wal::open(&dir, WAL_FILES[0]).unwrap().1.len(), records);
        let _ = std::fs::remove_dir_all(dir);
    }
}
