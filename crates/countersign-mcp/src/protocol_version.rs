//! The two protocol generations a client may speak, and a result shaped for each.
//!
//! Protocol 2026-07-28 requires `resultType` on every result; the revisions before it never had
//! the member, and strict clients of those revisions reject what they do not know. rmcp shapes
//! the results that pass through its server session; this is for the answers written without
//! it (the raw-bytes guard's refusals, the relay's), which must follow the same rule.

use rmcp::model::{CallToolResult, ProtocolVersion, ResultType};

/// Whether `version` is 2026-07-28 or later (ISO dates compare as strings).
pub(crate) fn is_modern(version: &str) -> bool {
    version >= ProtocolVersion::V_2026_07_28.as_str()
}

/// `result` for a client of the modern generation (with `resultType`) or an older one
/// (without).
pub(crate) fn shaped(mut result: CallToolResult, modern: bool) -> CallToolResult {
    result.result_type = modern.then_some(ResultType::COMPLETE);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generations() {
        assert!(is_modern("2026-07-28"));
        assert!(!is_modern("2025-11-25"));
        assert!(!is_modern("2025-06-18"));
        let r = || CallToolResult::success(Vec::new());
        let modern = serde_json::to_value(shaped(r(), true)).unwrap_or_default();
        assert_eq!(modern["resultType"], "complete");
        let older = serde_json::to_value(shaped(r(), false)).unwrap_or_default();
        assert!(older.get("resultType").is_none());
    }
}
