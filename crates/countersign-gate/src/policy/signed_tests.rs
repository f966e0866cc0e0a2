//! A policy signed with a passkey: an assertion whose challenge is the raw policy digest counts
//! for the admin listed with that passkey, and for no one else; the SSH forms are tested with
//! real `ssh-keygen` keys in tests/signed_policy.rs.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use super::*;
use crate::approval::webauthn::tests::{Authenticator, Ceremony, ORIGIN, es256};

fn approvers(admin: &str, passkey_of: &Authenticator) -> Approvers {
    Approvers::from_toml(&format!(
        "[[admin]]\nname = \"{admin}\"\npasskeys = [{{ id = \"{}\", key = \"{}\", origin = \"{ORIGIN}\" }}]\n\
         [[admin]]\nname = \"other\"\n",
        URL_SAFE_NO_PAD.encode(&passkey_of.id),
        URL_SAFE_NO_PAD.encode(passkey_of.cose_key()),
    ))
    .expect("approvers")
}

#[test]
fn a_passkey_assertion_over_the_digest_signs_the_policy_for_its_admin_only() {
    let carol = es256(21);
    let bundle = PolicyBundle::new("[tools.\"x\"]\nmode = \"approval\"\n".into(), None);
    let digest = bundle.digest().expect("digest");
    let assertion = carol.assert(&Ceremony {
        challenge: digest.as_bytes().to_vec(),
        ..Ceremony::default()
    });
    let mut sigs = PolicySignatures::new(digest);
    let signed_as =
        |name: &str| AdminSignature::new(name.into(), Signature::WebAuthn(assertion.to_text()));
    sigs.add(digest, signed_as("carol"));
    let file = approvers("carol", &carol);
    let signed = check_signed(&bundle, Some(&sigs), &file).expect("carol signed it");
    assert_eq!(signed.admins().collect::<Vec<_>>(), ["carol"]);
    assert_eq!(
        signed.signatures()[0].key(),
        webauthn::passkey_text(&file.admins()[0].passkeys()[0])
    );
    // The same assertion under another admin's name does not count.
    let mut other = PolicySignatures::new(digest);
    other.add(digest, signed_as("other"));
    let e = check_signed(&bundle, Some(&other), &file).expect_err("not other's passkey");
    assert_eq!(e.code().as_str(), "POLICY_UNSIGNED");
    // An assertion over anything else does not sign this policy.
    let stale = carol.assert(&Ceremony::default());
    let mut sigs = PolicySignatures::new(digest);
    sigs.add(
        digest,
        AdminSignature::new("carol".into(), Signature::WebAuthn(stale.to_text())),
    );
    let e = check_signed(&bundle, Some(&sigs), &file).expect_err("another challenge");
    assert!(
        matches!(
            e,
            Error::PolicyUnsigned {
                have: 0,
                need: 1,
                ..
            }
        ),
        "{e}"
    );
    // The file round-trips the assertion.
    let mut one = PolicySignatures::new(digest);
    one.add(digest, signed_as("carol"));
    let text = one.to_toml().expect("toml");
    assert_eq!(PolicySignatures::from_toml(&text).expect("parse"), one);
}
