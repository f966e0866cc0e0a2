//! How much a verified receipt proves about where its records stand (CONTRACT.md section 11):
//! only that they are chained to each other, or also that they are in the log a trusted key
//! signed, or also that enough trusted witnesses saw that log.

use std::fmt;
use std::str::FromStr;

/// The assurance a verified receipt gives, with what it rests on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Assurance {
    /// The hash chain of the stretch and the signatures hold; nothing anchors the stretch, so
    /// whoever wrote the receipt could have written a whole consistent one.
    Chained,
    /// Also every record is proven in the tree of a checkpoint signed by the trusted log key.
    Logged {
        /// The checkpoint's tree size.
        size: u64,
    },
    /// Also that checkpoint is cosigned by at least the quorum of the trusted witnesses.
    Witnessed {
        /// The checkpoint's tree size.
        size: u64,
        /// How many trusted witnesses validly cosigned it.
        cosigned: usize,
        /// How many witnesses are trusted.
        of: usize,
    },
}

impl Assurance {
    /// The level reached, for comparing with a level required.
    pub fn level(&self) -> Level {
        match self {
            Assurance::Chained => Level::Chained,
            Assurance::Logged { .. } => Level::Logged,
            Assurance::Witnessed { .. } => Level::Witnessed,
        }
    }

    /// The size of the checkpoint the records were proven against, above `chained`.
    pub fn checkpoint_size(&self) -> Option<u64> {
        match self {
            Assurance::Chained => None,
            Assurance::Logged { size } | Assurance::Witnessed { size, .. } => Some(*size),
        }
    }

    /// How many trusted witnesses cosigned, and of how many, when witnessed.
    pub fn cosigned(&self) -> Option<(usize, usize)> {
        match self {
            Assurance::Witnessed { cosigned, of, .. } => Some((*cosigned, *of)),
            _ => None,
        }
    }

    /// Whether this is at least `required`.
    pub fn meets(&self, required: Level) -> bool {
        self.level() >= required
    }
}

impl fmt::Display for Assurance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Assurance::Chained => f.write_str("chained"),
            Assurance::Logged { size } => write!(f, "logged (checkpoint of size {size})"),
            Assurance::Witnessed { size, cosigned, of } => {
                write!(f, "witnessed {cosigned}/{of} (checkpoint of size {size})")
            }
        }
    }
}

/// An assurance level, ordered from the least to the most proven.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// Hash chain and signatures only.
    Chained,
    /// Inclusion proven against a checkpoint signed by the log key.
    Logged,
    /// And cosigned by the witness quorum.
    Witnessed,
}

impl Level {
    /// Every level, from the least proven.
    pub const ALL: [Level; 3] = [Level::Chained, Level::Logged, Level::Witnessed];

    /// The level's name: `chained`, `logged` or `witnessed`.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Chained => "chained",
            Level::Logged => "logged",
            Level::Witnessed => "witnessed",
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A name that is not an assurance level.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not an assurance level: expected chained, logged or witnessed")]
pub struct UnknownLevel;

impl FromStr for Level {
    type Err = UnknownLevel;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Level::ALL
            .into_iter()
            .find(|l| l.as_str() == s)
            .ok_or(UnknownLevel)
    }
}
