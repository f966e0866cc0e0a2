//! Risk classes, carried in tokens by name.
//!
//! Names on the wire (never bit numbers) keep a token readable in an incident review and keep a
//! reordering of this enum from silently changing what an old token means.

use std::fmt;
use std::str::FromStr;

use crate::error::Error;

/// How consequential a tool call is (CONTRACT.md section 6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum RiskClass {
    /// Reads only.
    Read,
    /// Changes data the caller owns.
    Write,
    /// Spends money.
    Billing,
    /// Administrative change.
    Admin,
    /// Grants or revokes access.
    PermissionChange,
    /// Acts outside the system (sends, publishes, calls out).
    ExternalSideEffect,
    /// Deletes or destroys.
    Destructive,
}

impl RiskClass {
    /// Every class, in the contract's order.
    pub const ALL: [RiskClass; 7] = [
        RiskClass::Read,
        RiskClass::Write,
        RiskClass::Billing,
        RiskClass::Admin,
        RiskClass::PermissionChange,
        RiskClass::ExternalSideEffect,
        RiskClass::Destructive,
    ];

    /// The wire name, e.g. `permission_change`.
    pub fn as_str(self) -> &'static str {
        match self {
            RiskClass::Read => "read",
            RiskClass::Write => "write",
            RiskClass::Billing => "billing",
            RiskClass::Admin => "admin",
            RiskClass::PermissionChange => "permission_change",
            RiskClass::ExternalSideEffect => "external_side_effect",
            RiskClass::Destructive => "destructive",
        }
    }
}

impl fmt::Display for RiskClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for RiskClass {
    type Err = Error;

    /// Exact wire names only: no case folding, no aliases.
    fn from_str(s: &str) -> Result<Self, Error> {
        RiskClass::ALL
            .into_iter()
            .find(|r| r.as_str() == s)
            .ok_or_else(|| Error::UnknownRisk(s.chars().take(64).collect()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_nothing_else_parses() {
        for r in RiskClass::ALL {
            assert_eq!(r.as_str().parse::<RiskClass>().expect("name"), r);
            assert_eq!(r.to_string(), r.as_str());
        }
        for bad in [
            "",
            "Read",
            "WRITE",
            "0",
            "permission-change",
            "destructive ",
        ] {
            let err = bad.parse::<RiskClass>().expect_err("not a name");
            assert_eq!(err.code().as_str(), "INVALID_RISK");
        }
    }
}
