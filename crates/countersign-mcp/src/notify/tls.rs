//! Whom an `https://` notify endpoint must prove itself to: the public roots of the Mozilla
//! program (`webpki-roots`, the same on every host, so a delivery does not depend on what the
//! machine happens to trust), plus the CAs of an operator's `--notify-ca` file for private
//! endpoints. rustls with ring is the one TLS stack; no client certificate is sent.

use std::path::Path;
use std::sync::{Arc, OnceLock};

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use rustls::{ClientConfig, RootCertStore};

use crate::error::{Error, Result};

/// The protocol spoken inside the tunnel, offered by ALPN.
const HTTP_1_1: &[u8] = b"http/1.1";

/// The roots an announcement's endpoint is checked against.
#[derive(Debug, Clone, Default)]
pub(crate) struct NotifyTls {
    /// With the operator's CAs; `None` for the public roots alone, built on the first HTTPS
    /// announcement (most gates announce over plain HTTP or not at all).
    extra: Option<Arc<ClientConfig>>,
}

impl NotifyTls {
    /// The public roots and the certificates of the PEM file at `path`.
    ///
    /// # Errors
    /// `CONFIG_INVALID` for a file that cannot be read, holds no certificate, or holds one that
    /// is not a usable CA certificate.
    pub(crate) fn with_ca_file(path: &Path) -> Result<Self> {
        let bad = |why: String| Error::Config(format!("notify CA file {}: {why}", path.display()));
        let pem = std::fs::read(path).map_err(|e| bad(format!("cannot be read: {e}")))?;
        let mut roots = public_roots();
        let mut added = 0_usize;
        for cert in CertificateDer::pem_slice_iter(&pem) {
            let cert = cert.map_err(|e| bad(format!("not PEM: {e}")))?;
            roots
                .add(cert)
                .map_err(|e| bad(format!("a certificate that is not a usable CA: {e}")))?;
            added += 1;
        }
        if added == 0 {
            return Err(bad("holds no PEM certificate".into()));
        }
        let config = client_config(roots).map_err(|e| bad(e.to_string()))?;
        Ok(NotifyTls {
            extra: Some(config),
        })
    }

    /// The client settings for one connection.
    ///
    /// # Errors
    /// When rustls refuses its own defaults, which would be a build without the ring provider.
    pub(super) fn config(&self) -> std::result::Result<Arc<ClientConfig>, rustls::Error> {
        static PUBLIC: OnceLock<std::result::Result<Arc<ClientConfig>, rustls::Error>> =
            OnceLock::new();
        match &self.extra {
            Some(config) => Ok(config.clone()),
            None => PUBLIC.get_or_init(|| client_config(public_roots())).clone(),
        }
    }
}

fn public_roots() -> RootCertStore {
    RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    }
}

/// ring, named rather than taken from the process's default, so no other crate's choice of
/// provider changes what is spoken; the safe default protocol versions (TLS 1.3 and 1.2).
fn client_config(roots: RootCertStore) -> std::result::Result<Arc<ClientConfig>, rustls::Error> {
    // rustls marks ring's provider deprecated for lacking post-quantum key exchange; the other
    // provider, aws-lc-rs, needs cmake and nasm to build. Endpoints agree on X25519 or P-256.
    #[allow(deprecated)]
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![HTTP_1_1.to_vec()];
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ca_file_without_a_certificate_is_refused() {
        let dir = tempfile::tempdir().expect("dir");
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "no certificate here\n").expect("write");
        let e = NotifyTls::with_ca_file(&empty).expect_err("empty");
        assert_eq!(e.code().as_str(), "CONFIG_INVALID");
        assert!(e.to_string().contains("no PEM certificate"), "{e}");
        let missing = dir.path().join("missing.pem");
        let e = NotifyTls::with_ca_file(&missing).expect_err("missing");
        assert_eq!(e.code().as_str(), "CONFIG_INVALID");
        assert!(e.to_string().contains("cannot be read"), "{e}");
    }

    #[test]
    fn the_public_roots_make_a_config() {
        let config = NotifyTls::default().config().expect("public roots");
        assert_eq!(config.alpn_protocols, [HTTP_1_1.to_vec()]);
    }
}
