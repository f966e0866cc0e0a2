//! Mint → verify, and every refusal of CONTRACT.md section 4 in its place in the order.

use countersign_token::{Error, RiskClass, Signer, TokenConfig, Verifier, danger};

use crate::common::*;

fn code(result: Result<impl std::fmt::Debug, Error>) -> &'static str {
    match result {
        Ok(accepted) => panic!("must be refused, was accepted: {accepted:?}"),
        Err(e) => e.code().as_str(),
    }
}

fn check(token: &str, call: &Call, now: i64) -> Result<countersign_token::Claims, Error> {
    danger::verify_without_consuming(
        &verifier(&ring(SECRET_A)),
        token,
        &call.binding(),
        now,
        Some(LEDGER),
    )
}

#[tokio::test]
async fn round_trip_consumes_once() {
    let ring = ring(SECRET_A);
    let call = Call::sample();
    let token = mint(&ring, &call);
    let guard = TestGuard::new();
    let verified = verifier(&ring)
        .verify(&token, &call.binding(), NOW + 30, &guard)
        .await
        .expect("valid token");
    assert_eq!(verified.claims().tool, "delete_repo");
    assert_eq!(verified.claims().risk, RiskClass::Destructive);
    assert_eq!(verified.claims().exp, NOW + 600);
    assert_eq!(verified.claims().ledger.as_deref(), Some(LEDGER));
    assert_eq!(verified.kid().as_str(), "default");
    let again = verifier(&ring)
        .verify(&token, &call.binding(), NOW + 31, &guard)
        .await;
    assert_eq!(code(again), "TOKEN_REPLAYED");
}

#[tokio::test]
async fn unreachable_store_refuses() {
    let ring = ring(SECRET_A);
    let call = Call::sample();
    let token = mint(&ring, &call);
    let mut guard = TestGuard::new();
    guard.reachable = false;
    let result = verifier(&ring)
        .verify(&token, &call.binding(), NOW, &guard)
        .await;
    assert_eq!(code(result), "STORE_UNAVAILABLE");
}

#[tokio::test]
async fn another_ledger_refuses_before_consuming() {
    let ring = ring(SECRET_A);
    let call = Call::sample();
    let token = mint(&ring, &call);
    let mut other = TestGuard::new();
    other.id = "ledger-elsewhere".into();
    let result = verifier(&ring)
        .verify(&token, &call.binding(), NOW, &other)
        .await;
    assert_eq!(code(result), "TOKEN_BINDING_MISMATCH");
    assert!(other.seen.lock().expect("lock").is_empty());
}

#[tokio::test]
async fn replay_protection_needs_a_ledger_id_to_mint_and_an_l_to_verify() {
    let ring = ring(SECRET_A);
    let call = Call::sample();
    let err = signer(&ring)
        .mint(&call.binding(), NOW, None)
        .expect_err("no ledger id");
    assert_eq!(err.code().as_str(), "CONFIG_INVALID");
    let off = TokenConfig::new().with_replay_protection(false);
    let unbound = Signer::new(ring.clone(), off.clone())
        .expect("signer")
        .mint(&call.binding(), NOW, None)
        .expect("mint without ledger");
    assert_eq!(unbound.claims.ledger, None);
    // A verifier with replay protection on refuses a token bound to no ledger.
    let result = verifier(&ring)
        .verify(&unbound.token, &call.binding(), NOW, &TestGuard::new())
        .await;
    assert_eq!(code(result), "TOKEN_BINDING_MISMATCH");
    // With protection off it still consumes the nonce.
    let guard = TestGuard::new();
    let lax = Verifier::new(ring.clone(), off).expect("verifier");
    lax.verify(&unbound.token, &call.binding(), NOW, &guard)
        .await
        .expect("valid");
    let again = lax
        .verify(&unbound.token, &call.binding(), NOW, &guard)
        .await;
    assert_eq!(code(again), "TOKEN_REPLAYED");
}

#[test]
fn two_mints_of_the_same_call_differ() {
    let ring = ring(SECRET_A);
    let call = Call::sample();
    let a = signer(&ring)
        .mint(&call.binding(), NOW, Some(LEDGER))
        .expect("mint");
    let b = signer(&ring)
        .mint(&call.binding(), NOW, Some(LEDGER))
        .expect("mint");
    assert_ne!(a.token, b.token);
    assert_ne!(a.claims.nonce, b.claims.nonce);
    assert_eq!(a.claims.args_tag, b.claims.args_tag);
}

#[test]
fn each_binding_field_alone_is_a_binding_mismatch() {
    let ring = ring(SECRET_A);
    let call = Call::sample();
    let token = mint(&ring, &call);
    check(&token, &call, NOW).expect("unchanged call verifies");
    let mut variants: Vec<(&str, Call)> = Vec::new();
    let mut c = call.clone();
    c.tool = "delete_repos".into();
    variants.push(("tool", c));
    let mut c = call.clone();
    c.args = json(r#"{"owner":"acme","repo":"site","force":false}"#);
    variants.push(("args", c));
    let mut c = call.clone();
    c.risk = RiskClass::Admin;
    variants.push(("risk", c));
    let mut c = call.clone();
    c.principal.tenant = Some("other".into());
    variants.push(("tenant", c));
    let mut c = call.clone();
    c.principal.subject = None;
    variants.push(("subject", c));
    let mut c = call.clone();
    c.principal.session = Some("s-2".into());
    variants.push(("session", c));
    for (what, changed) in variants {
        assert_eq!(
            code(check(&token, &changed, NOW)),
            "TOKEN_BINDING_MISMATCH",
            "{what}"
        );
    }
    // A principal the token did not have is a mismatch too.
    let mut anonymous = call.clone();
    anonymous.principal = Default::default();
    let bare = mint(&ring, &anonymous);
    assert_eq!(code(check(&bare, &call, NOW)), "TOKEN_BINDING_MISMATCH");
    check(&bare, &anonymous, NOW).expect("anonymous verifies");
}

#[test]
fn expiry_is_exclusive_and_iat_skew_is_bounded() {
    let ring = ring(SECRET_A);
    let call = Call::sample();
    let token = mint(&ring, &call);
    let exp = NOW + 600;
    check(&token, &call, exp - 1).expect("last valid second");
    assert_eq!(code(check(&token, &call, exp)), "TOKEN_EXPIRED");
    assert_eq!(code(check(&token, &call, exp + 3600)), "TOKEN_EXPIRED");
    // A verifier whose clock is behind: up to the 60 s skew is tolerated, beyond is not.
    check(&token, &call, NOW - 60).expect("within skew");
    assert_eq!(code(check(&token, &call, NOW - 61)), "TOKEN_EXPIRED");
}

#[test]
fn another_key_with_the_same_kid_is_a_signature_mismatch() {
    let call = Call::sample();
    let forged = mint(&ring(SECRET_B), &call);
    assert!(forged.starts_with("cs1.default."));
    assert_eq!(code(check(&forged, &call, NOW)), "TOKEN_SIGNATURE_MISMATCH");
}

#[test]
fn unknown_kid() {
    let call = Call::sample();
    let token = hand_made(SECRET_A, "someone-else", b"{}");
    assert_eq!(code(check(&token, &call, NOW)), "TOKEN_UNKNOWN_KEY");
}

#[test]
fn version_two_under_a_valid_mac_is_unsupported() {
    let call = Call::sample();
    let genuine = mint(&ring(SECRET_A), &call);
    let claims = unb64(genuine.split('.').nth(2).expect("claims part"));
    let claims = String::from_utf8(claims).expect("utf-8");
    assert!(claims.ends_with(r#""v":1}"#), "{claims}");
    let v2 = claims.replace(r#""v":1}"#, r#""v":2}"#);
    let token = hand_made(SECRET_A, "default", v2.as_bytes());
    assert_eq!(code(check(&token, &call, NOW)), "TOKEN_VERSION_UNSUPPORTED");
    // The crate's raw signer (used by the fuzzer) agrees with the hand-made MAC.
    assert_eq!(
        danger::sign_raw_claims(&ring(SECRET_A), v2.as_bytes()),
        token
    );
    assert_eq!(
        danger::sign_raw_claims(&ring(SECRET_A), claims.as_bytes()),
        genuine
    );
    // Even when the rest of the claims would not be version 1.
    let token = hand_made(SECRET_A, "default", br#"{"v":2,"x":[]}"#);
    assert_eq!(code(check(&token, &call, NOW)), "TOKEN_VERSION_UNSUPPORTED");
}

#[test]
fn malformed_shapes() {
    let call = Call::sample();
    let genuine = mint(&ring(SECRET_A), &call);
    let parts: Vec<&str> = genuine.split('.').collect();
    let (kid, claims, mac) = (parts[1], parts[2], parts[3]);
    let cases = [
        String::new(),
        "cs1".into(),
        "cs1 default claims mac".into(),
        "...".into(),
        format!("cs1..{claims}.{mac}"),
        format!("cs1.{kid}..{mac}"),
        format!("cs1.{kid}.{claims}."),
        format!("cs2.{kid}.{claims}.{mac}"),
        format!("CS1.{kid}.{claims}.{mac}"),
        format!("cs1.{kid}.{claims}.{mac}.extra"),
        format!("cs1.{kid}.{claims}"),
        format!("cs1.bad kid.{claims}.{mac}"),
        format!("cs1.{}.{claims}.{mac}", "k".repeat(33)),
        format!("cs1.{kid}.{claims}=.{mac}"),
        format!("cs1.{kid}.{claims}.{mac}="),
        format!("cs1.{kid}.+{}.{mac}", &claims[1..]),
        format!("cs1.{kid}.{claims}./{}", &mac[1..]),
        format!("cs1.{kid}.{claims}.{}", &mac[..42]),
        format!("cs1.{kid}.{claims}.{mac}AA"),
        format!(" {genuine}"),
        format!("{genuine}\n"),
        "x".repeat(100_000),
    ];
    for token in &cases {
        assert_eq!(
            code(check(token, &call, NOW)),
            "TOKEN_MALFORMED",
            "{token:?}"
        );
    }
}

#[test]
fn non_canonical_trailing_bits_are_malformed() {
    let call = Call::sample();
    let genuine = mint(&ring(SECRET_A), &call);
    let parts: Vec<&str> = genuine.split('.').collect();
    // 32 bytes → 43 characters, the last carrying 4 bits of data and 2 that must be zero.
    let mac = parts[3];
    let last = mac.as_bytes()[42];
    let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let index = alphabet.iter().position(|c| *c == last).expect("alphabet");
    for stray in 1..4 {
        let spelled = alphabet[index | stray] as char;
        let token = format!("cs1.{}.{}.{}{spelled}", parts[1], parts[2], &mac[..42]);
        assert_ne!(token, genuine);
        assert_eq!(
            code(check(&token, &call, NOW)),
            "TOKEN_MALFORMED",
            "{token}"
        );
    }
}

#[test]
fn bad_claims_under_a_valid_mac_are_malformed() {
    let call = Call::sample();
    let genuine = mint(&ring(SECRET_A), &call);
    let claims =
        String::from_utf8(unb64(genuine.split('.').nth(2).expect("claims"))).expect("utf-8");
    let n = claims.find(r#""n":"#).expect("nonce");
    let cases: Vec<String> = vec![
        "not json".into(),
        "[]".into(),
        "1".into(),
        "{}".into(),
        r#"{"v":"1"}"#.into(),
        r#"{"v":1.5}"#.into(),
        format!(" {claims}"),
        claims.replace(r#","v":1}"#, r#","v":1,"zz":0}"#),
        claims.replace(r#""risk":"destructive""#, r#""risk":"nuclear""#),
        claims.replace(r#""risk":"destructive""#, r#""risk":6"#),
        claims.replace(r#""tool":"delete_repo""#, r#""tool":["delete_repo"]"#),
        claims.replace(r#""session":"s-1","#, r#""session":"s-1","session":"s-1","#),
        claims.replace(r#""tool":"delete_repo""#, r#""tool":"delete\u005frepo""#),
        claims.replace(r#""tool":"delete_repo""#, "\"tool\":\"cafe\u{301}\""),
        claims.replace(",\"exp\":", ", \"exp\":"),
        format!("{}\"n\":\"AAAA\"{}", &claims[..n], &claims[n + 28..]),
        format!("{{\"v\":1,{}}}", &claims[1..claims.len() - 7]),
        claims.replace(r#""a":"#, r#""A":"#),
    ];
    for bad in cases {
        let token = hand_made(SECRET_A, "default", bad.as_bytes());
        assert_eq!(code(check(&token, &call, NOW)), "TOKEN_MALFORMED", "{bad}");
    }
    // The genuine claims, re-signed by hand, still verify: the cases above fail for their
    // content, not for being hand-made.
    let token = hand_made(SECRET_A, "default", claims.as_bytes());
    check(&token, &call, NOW).expect("hand-made genuine claims");
}

#[test]
fn short_secrets_are_refused() {
    for n in [0usize, 1, 16, 31] {
        let err = countersign_token::Keyring::from_secret(&"ab".repeat(n)).expect_err("short");
        assert_eq!(err.code().as_str(), "SECRET_TOO_SHORT", "{n} bytes");
    }
    countersign_token::Keyring::from_secret(&"ab".repeat(32)).expect("32 bytes");
}

#[test]
fn gate_controls_are_ignored_at_the_top_level_only() {
    let ring = ring(SECRET_A);
    let mut call = Call::sample();
    call.args = json(r#"{"repo":"site","dry_run":true}"#);
    let token = mint(&ring, &call);
    let mut executed = call.clone();
    executed.args = json(r#"{"repo":"site","confirmation_token":"cs1.x.y.z"}"#);
    check(&token, &executed, NOW).expect("controls ignored");
    executed.args = json(r#"{"repo":"site"}"#);
    check(&token, &executed, NOW).expect("controls ignored");
    executed.args = json(r#"{"repo":"site","nested":{"dry_run":true}}"#);
    assert_eq!(
        code(check(&token, &executed, NOW)),
        "TOKEN_BINDING_MISMATCH"
    );
    let mut nested = call.clone();
    nested.args = json(r#"{"repo":"site","opts":{"dry_run":true}}"#);
    let token = mint(&ring, &nested);
    executed.args = json(r#"{"repo":"site","opts":{}}"#);
    assert_eq!(
        code(check(&token, &executed, NOW)),
        "TOKEN_BINDING_MISMATCH"
    );
}

#[test]
fn member_order_and_nfc_equivalent_arguments_bind_the_same() {
    let ring = ring(SECRET_A);
    let mut call = Call::sample();
    call.args = json("{\"title\":\"caf\u{e9}\",\"n\":1.0,\"tags\":[\"x\"]}");
    let token = mint(&ring, &call);
    let mut same = call.clone();
    same.args = json("{ \"tags\" : [\"x\"], \"n\": 1, \"title\": \"cafe\u{301}\" }");
    check(&token, &same, NOW).expect("equivalent arguments");
    // NFC-equivalent tool names and principals bind the same too.
    same.principal.subject = Some("Ame\u{301}lie".into());
    let mut composed = call.clone();
    composed.principal.subject = Some("Am\u{e9}lie".into());
    let token = mint(&ring, &composed);
    check(&token, &same, NOW).expect("equivalent principal");
}
