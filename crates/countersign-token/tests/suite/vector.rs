//! The worked example of docs/tokens.md, recomputed from the contract's formulas with plain
//! SHA-256/HMAC and checked against the crate.

use std::sync::Arc;

use countersign_canon::{Principal, digest_framed};
use countersign_token::{Binding, Keyring, RiskClass, TokenConfig, Verifier, danger};
use sha2::Digest as _;

use crate::common::*;

const VECTOR: &str = include_str!("../data/token_v1_worked_example.json");

fn field<'a>(v: &'a serde_json::Value, name: &str) -> &'a str {
    v[name].as_str().expect(name)
}

#[test]
fn worked_example_reproduces() {
    let v: serde_json::Value = serde_json::from_str(VECTOR).expect("vector json");
    let secret = hex::decode(field(&v, "secret_hex")).expect("hex");
    let kid = field(&v, "kid");

    // Arguments: canonical bytes and the countersign/v1/args digest, by the formula.
    let args = json(field(&v, "args"));
    let canonical = field(&v, "args_canonical");
    let mut without = args.clone();
    if let countersign_canon::Value::Object(o) = &mut without {
        o.remove("dry_run");
    }
    assert_eq!(without.to_canonical_bytes(), canonical.as_bytes());
    let digest: [u8; 32] =
        sha2::Sha256::digest(framed(&[b"countersign/v1/args", canonical.as_bytes()])).into();
    assert_eq!(hex::encode(digest), field(&v, "args_digest"));
    assert_eq!(countersign_canon::args_digest(&args).as_bytes(), &digest);
    assert_eq!(
        digest_framed(b"countersign/v1/args", canonical.as_bytes()).as_bytes(),
        &digest
    );

    // The keyed argument tag and the MAC.
    let tag = hmac_sha256(&secret, &framed(&[b"countersign/v1/token-args", &digest]));
    assert_eq!(hex::encode(&tag[..16]), field(&v, "args_tag_hex"));
    let claims = field(&v, "claims");
    assert!(claims.contains(&format!("\"a\":\"{}\"", b64(&tag[..16]))));
    let nonce = hex::decode(field(&v, "nonce_hex")).expect("hex");
    assert!(claims.contains(&format!("\"n\":\"{}\"", b64(&nonce))));
    let mac = hmac_sha256(
        &secret,
        &framed(&[b"countersign/v1/token", kid.as_bytes(), claims.as_bytes()]),
    );
    let token = format!("cs1.{kid}.{}.{}", b64(claims.as_bytes()), b64(&mac));
    assert_eq!(token, field(&v, "token"));

    // The crate accepts it for exactly that call, with a keyring file holding the key.
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("keys.toml");
    let text = format!(
        "format = \"countersign-keyring/1\"\n[[keys]]\nkid = \"{kid}\"\nsecret = \"{}\"\ncreated_at = 0\nstatus = \"active\"\n",
        field(&v, "secret_hex")
    );
    std::fs::write(&path, text).expect("write");
    set_mode_0600(&path);
    let ring = Arc::new(Keyring::load(&path).expect("load"));
    let principal = Principal {
        tenant: Some(field(&v, "tenant").into()),
        subject: Some(field(&v, "subject").into()),
        session: None,
    };
    let tool = field(&v, "tool");
    let risk: RiskClass = field(&v, "risk").parse().expect("risk");
    let binding = Binding {
        tool,
        risk,
        args: &args,
        principal: &principal,
    };
    let verifier = Verifier::new(ring.clone(), TokenConfig::new()).expect("verifier");
    let iat = v["iat"].as_i64().expect("iat");
    let got = danger::verify_without_consuming(
        &verifier,
        &token,
        &binding,
        iat,
        Some(field(&v, "ledger")),
    )
    .expect("the worked example verifies");
    assert_eq!(got.exp, iat + v["ttl"].as_i64().expect("ttl"));
    assert_eq!(got.to_canonical_bytes(), claims.as_bytes());

    // And a token the crate mints for the same call differs only in its nonce.
    let minted = countersign_token::Signer::new(ring, TokenConfig::new())
        .expect("signer")
        .mint(&binding, iat, Some(field(&v, "ledger")))
        .expect("mint");
    let mut same = minted.claims.clone();
    same.nonce = nonce.try_into().expect("16 bytes");
    assert_eq!(same.to_canonical_bytes(), claims.as_bytes());
}

fn set_mode_0600(path: &std::path::Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
}
