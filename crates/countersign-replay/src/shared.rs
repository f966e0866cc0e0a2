//! Building blocks for stores that share a database with the ledger.
//!
//! The gate keeps its drafts in the same SQLite file or PostgreSQL database as the replay
//! ledger. Such a store follows the ledger's rules for what they share rather than keeping its
//! own copy of them: schema versions that only move forward, schema names safe to splice into
//! SQL, and one way of pooling PostgreSQL connections.

#[cfg(feature = "postgres")]
pub use crate::postgres::{postgres_pool, quoted_schema};
#[cfg(feature = "sqlite")]
pub use crate::sqlite_schema::{MigrateError, migrate as migrate_sqlite};
