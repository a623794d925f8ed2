//! A read handle on a database file whose writable handle has failed: a
//! redb storage backend that reads the file through its own descriptor and
//! keeps every write in memory. redb refuses every read of a handle after
//! one of its writes failed (`PreviousIo`), and opening a second handle on
//! the same file repairs it (writes the allocator state, marks it open),
//! which a full disk cannot take; over this backend the repair lands in
//! memory and the file is never touched. The file does not change while
//! the writable handle is broken (nothing writes it), so this handle reads
//! the last commit, which is everything acknowledged.
//!
//! Memory: the pages redb writes while it opens and closes the handle (its
//! header and allocator state), a few per region of the file.

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::Mutex;

/// Granularity of the in-memory writes.
const PAGE: u64 = 4096;

#[derive(Debug)]
pub(super) struct Overlay {
    file: File,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    /// The length redb has set (the file's own at the start).
    len: u64,
    /// File bytes from here on read as zeros (the least length redb set:
    /// what it cut off and grew again is new space).
    zero_from: u64,
    /// Pages written, by page number (each `PAGE` bytes).
    pages: HashMap<u64, Box<[u8]>>,
}

impl Overlay {
    /// Read `file` (opened read-only; no lock is taken).
    pub fn new(file: File) -> io::Result<Overlay> {
        let len = file.metadata()?.len();
        Ok(Overlay {
            file,
            state: Mutex::new(State {
                len,
                zero_from: len,
                pages: HashMap::new(),
            }),
        })
    }

    /// Bytes of `page` from the file, zeros from `zero_from` on.
    fn file_page(&self, page: u64, zero_from: u64) -> io::Result<Box<[u8]>> {
        let mut buf = vec![0u8; PAGE as usize];
        let want = zero_from.saturating_sub(page * PAGE).min(PAGE) as usize;
        let mut at = 0;
        while at < want {
            match self
                .file
                .read_at(&mut buf[at..want], page * PAGE + at as u64)
            {
                Ok(0) => break,
                Ok(n) => at += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(buf.into_boxed_slice())
    }
}

impl redb::StorageBackend for Overlay {
    fn len(&self) -> io::Result<u64> {
        Ok(self.state.lock().unwrap_or_else(|p| p.into_inner()).len)
    }

    fn read(&self, offset: u64, len: usize) -> io::Result<Vec<u8>> {
        let st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let end = offset + len as u64;
        if end > st.len {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("read of {offset}..{end} past the end ({})", st.len),
            ));
        }
        let mut out = Vec::with_capacity(len);
        let mut at = offset;
        while at < end {
            let page = at / PAGE;
            let from = (at % PAGE) as usize;
            let to = ((end - page * PAGE).min(PAGE)) as usize;
            match st.pages.get(&page) {
                Some(p) => out.extend_from_slice(&p[from..to]),
                None => out.extend_from_slice(&self.file_page(page, st.zero_from)?[from..to]),
            }
            at = page * PAGE + to as u64;
        }
        Ok(out)
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if len < st.len {
            // What is cut off reads as zeros if it grows again.
            let last = len / PAGE;
            st.pages.retain(|p, _| *p <= last);
            if let Some(p) = st.pages.get_mut(&last) {
                p[(len % PAGE) as usize..].fill(0);
            }
            st.zero_from = st.zero_from.min(len);
        }
        st.len = len;
        Ok(())
    }

    fn sync_data(&self, _eventual: bool) -> io::Result<()> {
        Ok(())
    }

    fn write(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let end = offset + data.len() as u64;
        let mut at = offset;
        while at < end {
            let page = at / PAGE;
            let from = (at % PAGE) as usize;
            let to = ((end - page * PAGE).min(PAGE)) as usize;
            let src = &data[(at - offset) as usize..(at - offset) as usize + (to - from)];
            if !st.pages.contains_key(&page) {
                let p = self.file_page(page, st.zero_from)?;
                st.pages.insert(page, p);
            }
            if let Some(p) = st.pages.get_mut(&page) {
                p[from..to].copy_from_slice(src);
            }
            at = page * PAGE + to as u64;
        }
        st.len = st.len.max(end);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use redb::{ReadableTableMetadata, TableDefinition};

    use super::*;

    const T: TableDefinition<'_, u64, &str> = TableDefinition::new("t");

    #[test]
    fn reads_the_last_commit_of_a_file_held_open_and_never_writes_it() {
        let dir = std::env::temp_dir().join(format!("overlay-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("db.redb");
        let db = redb::Database::create(&path).unwrap();
        let w = db.begin_write().unwrap();
        {
            let mut t = w.open_table(T).unwrap();
            for i in 0..2000u64 {
                t.insert(i, "x".repeat(100).as_str()).unwrap();
            }
        }
        w.commit().unwrap();
        let before = std::fs::read(&path).unwrap();

        // The writable handle stays open (and locked), as a broken one is.
        let file = File::open(&path).unwrap();
        let reader = redb::Builder::new()
            .create_with_backend(Overlay::new(file).unwrap())
            .unwrap();
        let r = reader.begin_read().unwrap();
        let t = r.open_table(T).unwrap();
        assert_eq!(t.len().unwrap(), 2000);
        assert_eq!(t.get(1999).unwrap().unwrap().value(), "x".repeat(100));
        drop((t, r));
        drop(reader);
        assert!(
            std::fs::read(&path).unwrap() == before,
            "the file is untouched"
        );
        drop(db);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
