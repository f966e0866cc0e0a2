//! The rollback anchor of an SQLite ledger: a small file outside the database that remembers the
//! newest consumption, so a database restored from an older backup is noticed at open.
//!
//! Restoring a backup would otherwise forget every consumption made after it and make those
//! tokens usable again. The anchor holds the last accepted nonce, its retention and the largest
//! token expiry ever accepted. It is written inside the SQLite write transaction, so writers of
//! several processes are serialized by SQLite's own lock and the anchor never goes backwards.
//! One `pread` and one `pwrite` of a fixed 256-byte record per acceptance, no fsync: its
//! durability matches `synchronous=NORMAL`, and an anchor that survives a crash the database's
//! last commits did not is a (correctly) detected rollback.

use std::fs::File;
use std::path::{Path, PathBuf};

use crate::Error;
use crate::id::LedgerId;

const RECORD_LEN: usize = 256;
const MAGIC: &str = "countersign-anchor-v1";

/// The anchor's content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Record {
    pub(crate) nonce: Vec<u8>,
    /// The retention instant stored with that nonce in the ledger.
    pub(crate) retain_until: i64,
    /// The largest token expiry ever accepted by this ledger.
    pub(crate) max_expiry: i64,
}

/// What reading the anchor found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Read {
    /// No consumption was ever anchored.
    Empty,
    Record(Record),
    /// Unreadable (torn or altered): treated as a rollback of unknown extent.
    Damaged,
}

/// An open anchor file.
#[derive(Debug)]
pub(crate) struct Anchor {
    file: File,
    path: PathBuf,
    ledger: LedgerId,
}

impl Anchor {
    /// Opens (creating, mode 0600) the anchor of `ledger` in `dir`.
    pub(crate) fn open(dir: &Path, ledger: &LedgerId) -> Result<Anchor, Error> {
        crate::store_url::create_private_dir(dir)?;
        let path = dir.join(format!("replay-{ledger}.anchor"));
        let mut opts = std::fs::OpenOptions::new();
        opts.read(true).write(true).create(true).truncate(false);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            opts.mode(0o600);
        }
        let file = opts.open(&path).map_err(|e| {
            Error::unavailable(&format!("cannot open anchor {}", path.display()), e)
        })?;
        Ok(Anchor {
            file,
            path,
            ledger: ledger.clone(),
        })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn read(&self) -> Result<Read, Error> {
        let mut buf = [0u8; RECORD_LEN];
        let n = read_at(&self.file, &mut buf)
            .map_err(|e| Error::unavailable("cannot read the rollback anchor", e))?;
        if n == 0 {
            return Ok(Read::Empty);
        }
        let parsed = buf
            .get(..n)
            .and_then(|b| std::str::from_utf8(b).ok())
            .and_then(|text| parse(text, &self.ledger));
        Ok(parsed.map_or(Read::Damaged, Read::Record))
    }

    /// Empties the anchor (after a damaged one has been fenced).
    pub(crate) fn clear(&self) -> Result<(), Error> {
        self.file
            .set_len(0)
            .map_err(|e| Error::unavailable("cannot reset the rollback anchor", e))
    }

    /// Records an acceptance; keeps the largest expiry seen so far.
    pub(crate) fn record(&self, nonce: &[u8], retain_until: i64, expiry: i64) -> Result<(), Error> {
        let max_expiry = match self.read()? {
            Read::Record(r) => r.max_expiry.max(expiry),
            // A damaged anchor already fenced the ledger at open; start a fresh record.
            Read::Empty | Read::Damaged => expiry,
        };
        let rec = Record {
            nonce: nonce.to_vec(),
            retain_until,
            max_expiry,
        };
        let bytes = render(&rec, &self.ledger);
        write_at(&self.file, &bytes)
            .map_err(|e| Error::unavailable("cannot write the rollback anchor", e))
    }
}

fn render(rec: &Record, ledger: &LedgerId) -> [u8; RECORD_LEN] {
    let body = format!(
        "{MAGIC} {ledger} {} {} {}",
        hex::encode(&rec.nonce),
        rec.retain_until,
        rec.max_expiry
    );
    let line = format!("{body} {:016x}\n", fnv1a(body.as_bytes()));
    // Pad with spaces so every write replaces the whole record.
    let mut out = [b' '; RECORD_LEN];
    let len = line.len().min(RECORD_LEN);
    if let (Some(dst), Some(src)) = (out.get_mut(..len), line.as_bytes().get(..len)) {
        dst.copy_from_slice(src);
    }
    out
}

fn parse(text: &str, ledger: &LedgerId) -> Option<Record> {
    let line = text.trim_end_matches(' ').strip_suffix('\n')?;
    let (body, sum) = line.rsplit_once(' ')?;
    if format!("{:016x}", fnv1a(body.as_bytes())) != sum {
        return None;
    }
    let mut fields = body.split(' ');
    if fields.next()? != MAGIC || fields.next()? != ledger.as_str() {
        return None;
    }
    let nonce = hex::decode(fields.next()?).ok()?;
    let retain_until = fields.next()?.parse().ok()?;
    let max_expiry = fields.next()?.parse().ok()?;
    if fields.next().is_some() || nonce.is_empty() {
        return None;
    }
    Some(Record {
        nonce,
        retain_until,
        max_expiry,
    })
}

/// A checksum against torn writes, not an authenticator: whoever can write the anchor can also
/// write the database, and the threat here is an honest restore, not a forger.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(unix)]
fn read_at(file: &File, buf: &mut [u8]) -> std::io::Result<usize> {
    use std::os::unix::fs::FileExt;
    let mut filled = 0;
    while filled < buf.len() {
        let Some(rest) = buf.get_mut(filled..) else {
            break;
        };
        match file.read_at(rest, filled as u64)? {
            0 => break,
            n => filled += n,
        }
    }
    Ok(filled)
}

#[cfg(unix)]
fn write_at(file: &File, buf: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    file.write_all_at(buf, 0)
}

#[cfg(not(unix))]
fn read_at(file: &File, buf: &mut [u8]) -> std::io::Result<usize> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = file;
    f.seek(SeekFrom::Start(0))?;
    f.read(buf)
}

#[cfg(not(unix))]
fn write_at(file: &File, buf: &[u8]) -> std::io::Result<()> {
    use std::io::{Seek, SeekFrom, Write};
    let mut f = file;
    f.seek(SeekFrom::Start(0))?;
    f.write_all(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_round_trips_and_keeps_the_largest_expiry() {
        let tmp = tempfile::tempdir().unwrap();
        let id = LedgerId::random();
        let a = Anchor::open(tmp.path(), &id).unwrap();
        assert_eq!(a.read().unwrap(), Read::Empty);
        a.record(&[1; 16], 500, 400).unwrap();
        a.record(&[2; 16], 300, 200).unwrap();
        assert_eq!(
            a.read().unwrap(),
            Read::Record(Record {
                nonce: vec![2; 16],
                retain_until: 300,
                max_expiry: 400
            })
        );
    }

    #[test]
    fn altered_or_foreign_anchor_is_damaged() {
        let tmp = tempfile::tempdir().unwrap();
        let id = LedgerId::random();
        let a = Anchor::open(tmp.path(), &id).unwrap();
        a.record(&[1; 16], 500, 400).unwrap();
        let text = std::fs::read_to_string(a.path()).unwrap();
        std::fs::write(a.path(), text.replacen("500", "501", 1)).unwrap();
        assert_eq!(a.read().unwrap(), Read::Damaged);
        let other = LedgerId::random();
        let rec = Record {
            nonce: vec![1],
            retain_until: 1,
            max_expiry: 1,
        };
        assert_eq!(
            parse(std::str::from_utf8(&render(&rec, &other)).unwrap(), &id),
            None
        );
    }

    #[cfg(unix)]
    #[test]
    fn anchor_file_is_private() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let a = Anchor::open(tmp.path(), &LedgerId::random()).unwrap();
        let mode = std::fs::metadata(a.path()).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
}
