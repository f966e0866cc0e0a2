//! The draft envelope: what a person approves (CONTRACT.md section 3).
//!
//! The revision covers the action, its normalized arguments, the digest of the tool definition
//! the action was proposed against and who asked; change any of them and the revision changes,
//! so an approval can never be carried over to something the approver did not see.

use crate::digest::{Digest, Domain, Revision, digest};
use crate::nfc::nfc;
use crate::value::{Object, Value};
use crate::write::write_string;

/// Who a call is made for; each part only when known.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Principal {
    /// The tenant.
    pub tenant: Option<String>,
    /// The subject (user or client).
    pub subject: Option<String>,
    /// The session.
    pub session: Option<String>,
}

impl Principal {
    /// Whether nothing is known.
    pub fn is_empty(&self) -> bool {
        self.tenant.is_none() && self.subject.is_none() && self.session.is_none()
    }

    /// The `principal` object of the envelope, or `None` when nothing is known.
    pub fn to_value(&self) -> Option<Value> {
        if self.is_empty() {
            return None;
        }
        let mut object = Object::new();
        for (name, part) in [
            ("tenant", &self.tenant),
            ("subject", &self.subject),
            ("session", &self.session),
        ] {
            if let Some(part) = part {
                object.insert(name, Value::String(nfc(part).into_owned()));
            }
        }
        Some(Value::Object(object))
    }
}

/// A draft envelope `{"v":1,"action":…,"args":…,"tool":…,"principal":{…}}`.
#[derive(Debug, Clone, PartialEq)]
pub struct Envelope {
    /// The tool name.
    pub action: String,
    /// The normalized arguments.
    pub args: Value,
    /// The `countersign/v1/tool` digest of the tool definition.
    pub tool: Digest,
    /// Who asked.
    pub principal: Principal,
}

impl Envelope {
    /// The envelope as a value (names and texts in NFC).
    pub fn to_value(&self) -> Value {
        let mut object = Object::new();
        object.insert("v", Value::Number(1.0));
        object.insert("action", Value::String(nfc(&self.action).into_owned()));
        object.insert("args", self.args.clone());
        object.insert("tool", Value::String(self.tool.to_hex()));
        if let Some(principal) = self.principal.to_value() {
            object.insert("principal", principal);
        }
        Value::Object(object)
    }

    /// The canonical bytes of the envelope.
    pub fn to_canonical_bytes(&self) -> Vec<u8> {
        // Written in place rather than through `to_value`, which would copy the arguments; the
        // members are in canonical order (UTF-16 code units of their names), as `to_value`'s
        // object would hold them, and a test holds the two forms equal.
        let mut out = Vec::with_capacity(self.args.size_hint() + self.action.len() + 160);
        out.extend_from_slice(b"{\"action\":");
        write_string(&nfc(&self.action), &mut out);
        out.extend_from_slice(b",\"args\":");
        self.args.write_canonical(&mut out);
        if let Some(principal) = self.principal.to_value() {
            out.extend_from_slice(b",\"principal\":");
            principal.write_canonical(&mut out);
        }
        out.extend_from_slice(b",\"tool\":\"");
        out.extend_from_slice(self.tool.to_hex().as_bytes());
        out.extend_from_slice(b"\",\"v\":1}");
        out
    }

    /// `digest("countersign/v1/revision", canonical bytes)`.
    pub fn revision(&self) -> Revision {
        Revision::of_canonical(&self.to_canonical_bytes())
    }
}

/// The `countersign/v1/args` digest: the arguments less the top-level members `dry_run` and
/// `confirmation_token`, which steer the gate and are not part of what is approved.
pub fn args_digest(args: &Value) -> Digest {
    let mut bytes = Vec::with_capacity(args.size_hint());
    match args {
        Value::Object(object) => {
            // The object written without the two steering members, never copied.
            bytes.push(b'{');
            let kept = object
                .iter()
                .filter(|(name, _)| !matches!(*name, "dry_run" | "confirmation_token"));
            for (i, (name, value)) in kept.enumerate() {
                if i > 0 {
                    bytes.push(b',');
                }
                write_string(name, &mut bytes);
                bytes.push(b':');
                value.write_canonical(&mut bytes);
            }
            bytes.push(b'}');
        }
        other => other.write_canonical(&mut bytes),
    }
    digest(Domain::Args, &bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Limits, Profile, parse};

    fn value(text: &str) -> Value {
        parse(text.as_bytes(), Profile::CountersignV1, &Limits::default()).expect("valid json")
    }

    #[test]
    fn envelope_has_the_contract_shape() {
        let tool = digest(Domain::Tool, b"{}");
        let mut envelope = Envelope {
            action: "publish_post".into(),
            args: value(r#"{"title":"hi"}"#),
            tool,
            principal: Principal::default(),
        };
        let expected =
            format!(r#"{{"action":"publish_post","args":{{"title":"hi"}},"tool":"{tool}","v":1}}"#);
        assert_eq!(
            String::from_utf8(envelope.to_canonical_bytes()).expect("utf-8"),
            expected
        );
        let anonymous = envelope.revision();
        envelope.principal.subject = Some("alice".into());
        let text = String::from_utf8(envelope.to_canonical_bytes()).expect("utf-8");
        assert!(
            text.contains(r#""principal":{"subject":"alice"}"#),
            "{text}"
        );
        assert_ne!(envelope.revision(), anonymous);
        assert_eq!(envelope.revision(), Revision::of_canonical(text.as_bytes()));
    }

    #[test]
    fn args_digest_ignores_gate_controls() {
        let plain = value(r#"{"a":1}"#);
        let steered = value(r#"{"a":1,"dry_run":true,"confirmation_token":"cs1.x"}"#);
        let nested = value(r#"{"a":1,"b":{"dry_run":true}}"#);
        assert_eq!(args_digest(&plain), args_digest(&steered));
        assert_eq!(args_digest(&plain), digest(Domain::Args, br#"{"a":1}"#));
        assert_ne!(args_digest(&plain), args_digest(&nested));
    }

    #[test]
    fn written_forms_equal_the_value_forms() {
        let tool = digest(Domain::Tool, b"{}");
        let principals = [
            Principal::default(),
            Principal {
                tenant: Some("acme".into()),
                subject: Some("Cafe\u{301}".into()),
                session: Some("s-1".into()),
            },
            Principal {
                session: Some("only".into()),
                ..Principal::default()
            },
        ];
        for principal in principals {
            let envelope = Envelope {
                action: "re\u{301}sume\"\n".into(),
                args: value(r#"{"b":[1,2.5,"x\u0001"],"a":{"t":null},"z":true}"#),
                tool,
                principal,
            };
            assert_eq!(
                envelope.to_canonical_bytes(),
                envelope.to_value().to_canonical_bytes()
            );
        }
        for text in [
            r#"{"dry_run":true,"b":1,"confirmation_token":"t","a":[{"dry_run":1}]}"#,
            r#"{"dry_run":true}"#,
            r#"{}"#,
            r#"[{"dry_run":true}]"#,
            r#""dry_run""#,
        ] {
            let args = value(text);
            let expected = match &args {
                Value::Object(o) => {
                    let mut o = o.clone();
                    o.remove("dry_run");
                    o.remove("confirmation_token");
                    Value::Object(o).to_canonical_bytes()
                }
                other => other.to_canonical_bytes(),
            };
            assert_eq!(
                args_digest(&args),
                digest(Domain::Args, &expected),
                "{text}"
            );
        }
    }
}
