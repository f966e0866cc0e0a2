//! The review page on the MCP server's listener: served at `/review` beside `/mcp`, reached
//! without the MCP bearer token, and refused to anyone who presents one or posts from another
//! origin.

use countersign_mcp::demo::DEMO_POLICY;

use crate::common::*;

#[tokio::test]
async fn http_serves_the_review_page_beside_mcp_without_bearer_access() {
    let home = Home::new(DEMO_POLICY);
    let auth = home.path().join("auth.toml");
    std::fs::write(
        &auth,
        "[[client]]\ntoken = \"tenant-a-token-7f3c9e21d4b8a650\"\ntenant = \"a\"\nsubject = \"agent\"\n",
    )
    .expect("auth file");
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&auth, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    }
    let auth = auth.display().to_string();
    let server = home
        .http(&["--demo", "--http", "127.0.0.1:0", "--auth", &auth])
        .await;
    let origin = format!("http://{}", server.addr);

    // The page answers without the MCP token, with its CSP.
    let r = raw_request(server.addr, "GET", "/review/login", &[], b"").await;
    assert_eq!(r.status, 200, "{r:?}");
    assert!(
        r.header("content-security-policy")
            .is_some_and(|c| c.contains("default-src 'none'")),
        "{r:?}"
    );
    let r = raw_request(server.addr, "GET", "/review", &[], b"").await;
    assert_eq!(r.status, 303, "no session: to the sign-in page");

    // The MCP token gives no access to it: the request is refused outright.
    let bearer = ("Authorization", "Bearer tenant-a-token-7f3c9e21d4b8a650");
    for path in ["/review", "/review/login", "/review/pending.json"] {
        let r = raw_request(server.addr, "GET", path, &[bearer], b"").await;
        assert_eq!(r.status, 403, "{path}: {r:?}");
    }

    // Only the host names `/mcp` answers: a rebound name gets nothing, signed in or not.
    for host in ["evil.test", "127.0.0.2"] {
        let r = raw_request(server.addr, "GET", "/review/login", &[("Host", host)], b"").await;
        assert_eq!(r.status, 403, "{host}: {r:?}");
    }

    // Only the page's own origin may post.
    let cross = [("Origin", "http://evil.test")];
    let r = raw_request(
        server.addr,
        "POST",
        "/review/login/challenge",
        &cross,
        b"{}",
    )
    .await;
    assert_eq!(r.status, 403, "{r:?}");
    let same = [("Origin", origin.as_str())];
    let r = raw_request(server.addr, "POST", "/review/login/challenge", &same, b"{}").await;
    // Past the origin check; this server has no approvers file, so nobody can sign in.
    assert_eq!(r.status, 500, "{r:?}");
    assert!(
        String::from_utf8_lossy(&r.body).contains("CONFIG_INVALID"),
        "{r:?}"
    );

    // `/mcp` still needs its token.
    let r = raw_request(server.addr, "POST", "/mcp", &[], b"{}").await;
    assert_eq!(r.status, 401, "{r:?}");
}
