//! The log's resources in the C2SP `tlog-tiles` layout (CONTRACT.md section 11): where each
//! lives under the log's prefix, and which of them a tree of a given size holds.
//!
//! The layout is fixed by the specification, not by this project, so any monitor that reads
//! Go's checksum database or a Sunlight log can follow this one: tiles are 256 hashes wide
//! (height 8), level `L` holds the hashes of complete subtrees of `256^L` records, and entry
//! bundles hold the records themselves, each behind a big-endian `u16` length.
//!
//! Paths come from the network, so they are parsed here by hand against the specification's
//! grammar rather than through a crate whose parser asserts on some inputs: every path either
//! names one resource or is refused.

use crate::error::{Error, Result};

/// Hashes in a full tile, and records in a full entry bundle.
pub const TILE_WIDTH: u16 = 256;

/// A tile's height in tree levels: `TILE_WIDTH` is `2^TILE_HEIGHT`.
pub const TILE_HEIGHT: u8 = 8;

/// The highest tile level a tree of fewer than `2^64` records has.
const MAX_LEVEL: u8 = 7;

/// What a path under the log's prefix names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogResource {
    /// `checkpoint`: the latest signed checkpoint.
    Checkpoint,
    /// `tile/<L>/<N>[.p/<W>]`: hashes at level `L`.
    Tile(TileAt),
    /// `tile/entries/<N>[.p/<W>]`: the records themselves.
    Entries(TileAt),
}

/// One tile or entry bundle: its level (0 for entries), its index within the level and its
/// width (`TILE_WIDTH` for a full one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TileAt {
    /// The tile level; 0 for an entry bundle.
    pub level: u8,
    /// The tile's index within its level.
    pub index: u64,
    /// How many hashes or records it holds, 1 to `TILE_WIDTH`.
    pub width: u16,
}

impl TileAt {
    /// The position of the first item (hash at the tile's level, or record) it holds.
    pub fn first(&self) -> Option<u64> {
        self.index.checked_mul(u64::from(TILE_WIDTH))
    }

    /// Whether a tree of `size` records holds this tile whole: every hash it lists is the
    /// root of a complete subtree of that tree (every record, for an entry bundle).
    pub fn within(&self, size: u64) -> bool {
        // Complete subtrees at level L, each of 256^L records.
        let available = size
            .checked_shr(u32::from(self.level) * u32::from(TILE_HEIGHT))
            .unwrap_or(0);
        self.first()
            .and_then(|f| f.checked_add(u64::from(self.width)))
            .is_some_and(|end| end <= available)
    }

    /// The `<N>[.p/<W>]` part of a path.
    fn suffix(&self) -> String {
        let mut n = self.index;
        let mut text = format!("{:03}", n % 1000);
        while n >= 1000 {
            n /= 1000;
            text = format!("x{:03}/{text}", n % 1000);
        }
        if self.width != TILE_WIDTH {
            text.push_str(&format!(".p/{}", self.width));
        }
        text
    }
}

impl LogResource {
    /// Parses `path`, relative to the log's prefix (`checkpoint`, `tile/0/x001/234.p/7`).
    ///
    /// # Errors
    /// `INVALID_ARGUMENT` for anything that is not exactly one resource's path in the
    /// specification's form (leading zeroes, a width of 0 or of 256 written out, a level above
    /// any tree's, a number too large).
    pub fn parse(path: &str) -> Result<Self> {
        if path == "checkpoint" {
            return Ok(LogResource::Checkpoint);
        }
        let rest = path
            .strip_prefix("tile/")
            .ok_or(malformed("not a log resource"))?;
        let (level, rest) = rest.split_once('/').ok_or(malformed("no tile index"))?;
        let (index, width) = tile_number(rest)?;
        if level == "entries" {
            return Ok(LogResource::Entries(TileAt {
                level: 0,
                index,
                width,
            }));
        }
        let level = decimal(level, 2).ok_or(malformed("bad tile level"))?;
        let level = u8::try_from(level)
            .ok()
            .filter(|l| *l <= MAX_LEVEL)
            .ok_or(malformed("no tree has a tile at that level"))?;
        Ok(LogResource::Tile(TileAt {
            level,
            index,
            width,
        }))
    }

    /// The path of this resource under the log's prefix; [`parse`](Self::parse) reads it back.
    pub fn path(&self) -> String {
        match self {
            LogResource::Checkpoint => "checkpoint".to_owned(),
            LogResource::Tile(t) => format!("tile/{}/{}", t.level, t.suffix()),
            LogResource::Entries(t) => format!("tile/entries/{}", t.suffix()),
        }
    }
}

/// `<N>[.p/<W>]`: `x`-prefixed groups of three digits, then a last group of three, then the
/// width of a partial tile (1 to 255, no leading zero).
fn tile_number(text: &str) -> Result<(u64, u16)> {
    let (number, width) = match text.split_once(".p/") {
        Some((number, width)) => {
            let w = decimal(width, 3)
                .and_then(|w| u16::try_from(w).ok())
                .filter(|w| (1..TILE_WIDTH).contains(w))
                .ok_or(malformed("bad partial tile width"))?;
            (number, w)
        }
        None => (text, TILE_WIDTH),
    };
    let groups: Vec<&str> = number.split('/').collect();
    let (last, leading) = groups.split_last().ok_or(malformed("no tile index"))?;
    let mut index: u64 = 0;
    for (i, group) in leading.iter().chain(std::iter::once(last)).enumerate() {
        let digits = if i < leading.len() {
            group.strip_prefix('x').ok_or(malformed("bad tile index"))?
        } else {
            group
        };
        if digits.len() != 3 || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(malformed("bad tile index"));
        }
        let value: u64 = digits.parse().map_err(|_| malformed("bad tile index"))?;
        index = index
            .checked_mul(1000)
            .and_then(|n| n.checked_add(value))
            .ok_or(malformed("tile index too large"))?;
    }
    // `x000/001` and `001` would name one tile twice; the specification's form has no
    // leading zero group.
    if !leading.is_empty() && leading.first().is_some_and(|g| *g == "x000") {
        return Err(malformed("bad tile index"));
    }
    Ok((index, width))
}

/// A decimal of at most `max_digits` digits with no leading zero (other than `0` itself).
fn decimal(text: &str, max_digits: usize) -> Option<u64> {
    let ok = !text.is_empty()
        && text.len() <= max_digits
        && text.bytes().all(|b| b.is_ascii_digit())
        && (text == "0" || !text.starts_with('0'));
    if ok { text.parse().ok() } else { None }
}

fn malformed(why: &'static str) -> Error {
    Error::LogMalformed {
        what: "log resource path",
        why,
    }
}

#[cfg(test)]
#[path = "tiles_tests.rs"]
mod tests;
