//! countersign-witness: a transparency-log witness over HTTP, and the log's client of
//! witnesses (C2SP `tlog-witness`, CONTRACT.md section 11).
//!
//! A witness is run by someone other than the log's operator, on another host. It keeps, per
//! log, the last checkpoint it cosigned, and cosigns a new one only when the log's key signed
//! it and a consistency proof shows it extends that one; so a log that rewrites, forks or
//! shrinks its history cannot get it cosigned, and a verifier that asks for cosignatures of
//! witnesses it trusts sees any split view. The decision and the state are
//! [`countersign_gate::log::witness`]; this crate is its HTTP front ([`WitnessServer`], run by
//! `countersign witness`) and the log's side of the protocol ([`submit`]).
//!
//! A monitor is the other outside party: it reads the log as C2SP `tlog-tiles` ([`LogReader`])
//! and checks every checkpoint and entry ([`follow_once`], run by `countersign log monitor`).
//!
//! ```no_run
//! use std::sync::Arc;
//!
//! use countersign_gate::log::witness::{SqliteWitnessStore, TrustedLogs, Witness};
//! use countersign_gate::log::WitnessKey;
//! use countersign_witness::WitnessServer;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let key = WitnessKey::read("witness.key".as_ref())?;
//! let mut logs = TrustedLogs::new();
//! logs.add_flag("countersign/LEDGER=countersign/LEDGER+1234abcd+AUJ…")?;
//! let state = Arc::new(SqliteWitnessStore::open("witness.db".as_ref())?);
//! let witness = Arc::new(Witness::new(key, logs, state));
//! let server = WitnessServer::bind("0.0.0.0:7380".parse()?, witness).await?;
//! server.run(async { let _ = tokio::signal::ctrl_c().await; }).await;
//! # Ok(())
//! # }
//! ```
#![forbid(unsafe_code)]

mod client;
mod error;
mod follow;
mod server;
mod witnesses;

pub use crate::client::{Cosignature, Prover, WitnessEndpoint, submit};
pub use crate::error::{Error, Result};
pub use crate::follow::{LogReader, follow_once};
pub use crate::server::{
    BODY_TIMEOUT, Body, MAX_BODY, SIZE_CONTENT_TYPE, WitnessServer, WitnessService,
};
pub use crate::witnesses::{Witnessed, Witnesses};
