//! A headless Chromium, from the Debian package, with a virtual passkey authenticator, driven
//! over the DevTools protocol: the browser the review-page tests approve in.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use chromiumoxide::browser::{Browser, BrowserConfig};
use chromiumoxide::cdp::browser_protocol::web_authn::{
    AddCredentialParams, AddVirtualAuthenticatorParams, AuthenticatorId, AuthenticatorProtocol,
    AuthenticatorTransport, Credential, EnableParams, GetCredentialsParams, RemoveCredentialParams,
    VirtualAuthenticatorOptions,
};
use chromiumoxide::page::{Page, ScreenshotParams};
use futures_util::StreamExt;

/// Where the Debian package puts the browser (`.ci/run` installs it).
pub const CHROMIUM: &str = "/usr/bin/chromium";

/// False (after saying so) when there is no browser to drive: the caller returns without
/// asserting anything.
#[must_use]
pub fn have_chromium() -> bool {
    let here = Path::new(CHROMIUM).exists();
    if !here {
        println!("skipped: chromium not installed");
    }
    here
}

/// Browser tests share two cores with everything else: one at a time in a test binary.
pub fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A headless Chromium with one page that holds a virtual passkey authenticator.
pub struct Chrome {
    /// The browser process.
    pub browser: Browser,
    /// The one page, holding the authenticator.
    pub page: Page,
    /// The virtual authenticator.
    pub authenticator: AuthenticatorId,
    _profile: tempfile::TempDir,
}

impl Chrome {
    /// Launches the browser with a virtual CTAP2 authenticator that verifies its user.
    pub async fn launch() -> Chrome {
        let profile = tempfile::tempdir().expect("profile");
        let config = BrowserConfig::builder()
            .chrome_executable(CHROMIUM)
            .no_sandbox()
            .new_headless_mode()
            .user_data_dir(profile.path())
            .window_size(1280, 1000)
            .arg("--disable-gpu")
            .arg("--disable-dev-shm-usage")
            .launch_timeout(Duration::from_secs(30))
            .build()
            .expect("browser config");
        let (browser, mut handler) = Browser::launch(config).await.expect("launch chromium");
        tokio::spawn(async move { while handler.next().await.is_some() {} });
        let page = browser.new_page("about:blank").await.expect("page");
        page.execute(EnableParams::default())
            .await
            .expect("WebAuthn.enable");
        let options = VirtualAuthenticatorOptions::builder()
            .protocol(AuthenticatorProtocol::Ctap2)
            .transport(AuthenticatorTransport::Internal)
            .has_resident_key(true)
            .has_user_verification(true)
            .is_user_verified(true)
            .build()
            .expect("authenticator options");
        let authenticator = page
            .execute(AddVirtualAuthenticatorParams::new(options))
            .await
            .expect("WebAuthn.addVirtualAuthenticator")
            .result
            .authenticator_id;
        Chrome {
            browser,
            page,
            authenticator,
            _profile: profile,
        }
    }

    /// The passkeys the authenticator holds.
    pub async fn passkeys(&self) -> Vec<Credential> {
        self.page
            .execute(GetCredentialsParams::new(self.authenticator.clone()))
            .await
            .expect("WebAuthn.getCredentials")
            .result
            .credentials
    }

    /// Puts every passkey of the authenticator back to signature counter 0, as a copy of it
    /// made before its first use would sign: the next assertion reports a counter that did not
    /// move on.
    pub async fn rewind_passkeys(&self) {
        let held = self.passkeys().await;
        assert!(!held.is_empty(), "the authenticator holds no passkey");
        for mut credential in held {
            let id = credential.credential_id.clone();
            self.page
                .execute(RemoveCredentialParams::new(self.authenticator.clone(), id))
                .await
                .expect("WebAuthn.removeCredential");
            credential.sign_count = 0;
            self.page
                .execute(AddCredentialParams::new(
                    self.authenticator.clone(),
                    credential,
                ))
                .await
                .expect("WebAuthn.addCredential");
        }
    }

    /// Removes every passkey of the authenticator but the one whose credential id is `keep`
    /// (base64url, as the approvers file lists it): a person picking their listed passkey where
    /// the authenticator holds others for the same site.
    pub async fn keep_only_passkey(&self, keep: &str) {
        let plain = |id: &str| id.replace('-', "+").replace('_', "/").replace('=', "");
        let held = self.passkeys().await;
        for credential in held {
            if plain(credential.credential_id.as_ref()) != plain(keep) {
                self.page
                    .execute(RemoveCredentialParams::new(
                        self.authenticator.clone(),
                        credential.credential_id,
                    ))
                    .await
                    .expect("WebAuthn.removeCredential");
            }
        }
    }

    /// Closes the browser and waits for it to exit.
    pub async fn close(mut self) {
        let _ = self.browser.close().await;
        let _ = self.browser.wait().await;
    }

    /// Opens `url` and waits for the navigation.
    pub async fn goto(&self, url: &str) {
        self.page.goto(url).await.expect("goto");
        self.page.wait_for_navigation().await.expect("navigation");
    }

    /// Clicks the element `selector` finds.
    pub async fn click(&self, selector: &str) {
        self.page
            .find_element(selector)
            .await
            .unwrap_or_else(|e| panic!("no {selector}: {e}"))
            .click()
            .await
            .expect("click");
    }

    /// Evaluates `expr` (promises awaited) and returns its JSON value.
    pub async fn js(&self, expr: &str) -> serde_json::Value {
        self.page
            .evaluate(expr)
            .await
            .unwrap_or_else(|e| panic!("evaluate {expr}: {e}"))
            .into_value()
            .unwrap_or(serde_json::Value::Null)
    }

    /// Waits until `expr` is true.
    pub async fn until(&self, expr: &str, what: &str) {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(20) {
            // During a navigation the page has no context to evaluate in: not yet.
            let now = match self.page.evaluate(expr).await {
                Ok(v) => v.into_value().unwrap_or(serde_json::Value::Null),
                Err(_) => serde_json::Value::Null,
            };
            if now == serde_json::Value::Bool(true) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("timed out waiting for {what}");
    }

    /// Edits one field of the draft page as a person does — the input for `pointer` set to
    /// `value`, then "Save as a new revision" — and waits for the page of the new revision,
    /// which it returns.
    pub async fn save_edit(&self, pointer: &str, value: &str) -> String {
        let revision = "document.body.dataset.revision";
        let old = self.js(revision).await.as_str().unwrap_or("").to_owned();
        let quoted = |s: &str| serde_json::Value::from(s).to_string();
        self.js(&format!(
            "document.querySelector('[data-pointer=' + JSON.stringify({}) + ']').value = {}",
            quoted(pointer),
            quoted(value)
        ))
        .await;
        self.click("#save").await;
        self.until(
            &format!("document.readyState === 'complete' && {revision} !== '{old}'"),
            "the draft page of the new revision",
        )
        .await;
        self.js(revision).await.as_str().unwrap_or("").to_owned()
    }

    /// Waits until the review page `page` (its `data-page`: `login`, `list`, `draft`,
    /// `batch`) has loaded. A plain `/review/…` address goes through the sign-in page, whose
    /// script continues under the session's own path.
    pub async fn on_page(&self, page: &str) {
        self.until(
            &format!(
                "document.readyState === 'complete' && document.body.dataset.page === '{page}'"
            ),
            &format!("the {page} page"),
        )
        .await;
    }

    /// The status line once it says something final.
    pub async fn status(&self) -> String {
        self.until(
            "(() => { const t = document.getElementById('status').textContent; \
             return t !== '' && !t.startsWith('waiting'); })()",
            "the status line",
        )
        .await;
        self.js("document.getElementById('status').textContent")
            .await
            .as_str()
            .unwrap_or("")
            .to_owned()
    }

    /// The page's path.
    pub async fn path(&self) -> String {
        self.js("location.pathname")
            .await
            .as_str()
            .unwrap_or("")
            .to_owned()
    }

    /// Saves a full-page screenshot under `target/review-screenshots/` and checks it is a PNG.
    pub async fn screenshot(&self, name: &str) -> PathBuf {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/review-screenshots");
        std::fs::create_dir_all(&dir).expect("screenshot dir");
        let path = dir.join(format!("{name}.png"));
        let png = self
            .page
            .screenshot(ScreenshotParams::builder().full_page(true).build())
            .await
            .expect("screenshot");
        assert!(png.len() > 1000, "a screenshot of {} bytes", png.len());
        assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
        std::fs::write(&path, &png).expect("write screenshot");
        path
    }
}
