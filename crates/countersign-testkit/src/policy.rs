//! Policy text the suites and the benchmarks share.

/// The `[limits]` table of [`ROOMY_LIMITS`], as a macro so that a policy constant can be
/// `concat!`-ed from it and its own tool entries.
#[macro_export]
macro_rules! roomy_limits {
    () => {
        "[limits]\nopen_drafts = 1000000000\nproposals = { max = 1000000000, per = \"1m\" }\n"
    };
}

/// Per-principal ceilings no test or benchmark reaches: every proposal still counts against
/// them (the quota's read and write run as deployed), and none is refused.
pub const ROOMY_LIMITS: &str = roomy_limits!();

#[cfg(test)]
mod tests {
    #[test]
    fn the_roomy_limits_are_one_limits_table() {
        let parsed: toml::Table = super::ROOMY_LIMITS.parse().expect("toml");
        let limits = parsed["limits"].as_table().expect("a [limits] table");
        assert_eq!(parsed.len(), 1);
        assert_eq!(limits["open_drafts"].as_integer(), Some(1_000_000_000));
    }
}
