//! Reading back the gate's timing lines.
//!
//! The gate logs how long it held each run (`run finished`: `gate_us`, `claim_us`,
//! `outcome_us`, `action_us`, at `debug`) and, on SQLite, where each transaction's time went
//! (`transaction committed`: `begin_us` … `commit_us`, at `trace`). Benchmarks and tests read
//! those numbers off a live server's log; they read them with this one function, so the format
//! the gate writes and the one they expect cannot drift apart.

/// The whole number written as ` NAME=N` in `line` (a line of `tracing`'s plain text format),
/// or `None` when the field is absent or not a number.
pub fn logged_micros(line: &str, name: &str) -> Option<u64> {
    let key = format!(" {name}=");
    let rest = &line[line.find(&key)? + key.len()..];
    rest.split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::logged_micros;

    #[test]
    fn reads_a_field_and_only_a_whole_field() {
        let line = "DEBUG countersign_gate::execute: run finished draft=ab gate_us=212 claim_us=113 x_gate_us=9";
        assert_eq!(logged_micros(line, "gate_us"), Some(212));
        assert_eq!(logged_micros(line, "claim_us"), Some(113));
        assert_eq!(logged_micros(line, "outcome_us"), None);
        assert_eq!(logged_micros("a draft=ab", "draft"), None);
    }
}
