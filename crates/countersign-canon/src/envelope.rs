//! The draft envelope: what a person approves (CONTRACT.md section 3).
//!
//! The revision covers the action, its normalized arguments, the digest of the tool definition
//! the action was proposed against and who asked; change any of them and the revision changes,
//! so an approval can never be carried over to something the approver did not see.

use crate::digest::{Digest, Domain, Revision, digest};
use crate::nfc::nfc;
use crate::value::{Object, Value};

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
        self.to_value().to_canonical_bytes()
    }

    /// `digest("countersign/v1/revision", canonical bytes)`.
    pub fn revision(&self) -> Revision {
        Revision::of_canonical(&self.to_canonical_bytes())
    }
}

/// The `countersign/v1/args` digest: the arguments less the top-level members `dry_run` and
/// `confirmation_token`, which steer the gate and are not part of what is approved.
pub fn args_digest(args: &Value) -> Digest {
    let bytes = match args {
        Value::Object(object)
            if object.contains_key("dry_run") || object.contains_key("confirmation_token") =>
        {
            let mut object = object.clone();
            object.remove("dry_run");
            object.remove("confirmation_token");
            Value::Object(object).to_canonical_bytes()
        }
        other => other.to_canonical_bytes(),
    };
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
}
