//! Where a cycle's work goes, read from outside the processes that do it: the CPU time the two
//! replicas, the database's backends serving the run's database and the load generator itself
//! (its approving gate included) spend, from Linux `/proc`. Nothing here slows what it
//! measures: each is read once before the timed run and once after it. (The database's own
//! transaction counts are not read: a busy backend publishes them up to seconds late.)

use std::collections::BTreeMap;

/// CPU time (user + system) of a set of processes, in clock ticks, by process id.
#[derive(Debug, Default, Clone)]
pub(crate) struct Cpu(BTreeMap<u32, u64>);

/// The clock ticks per second `/proc/PID/stat` counts in (`getconf CLK_TCK`; 100 on Linux
/// unless the kernel was built otherwise).
fn ticks_per_second() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

/// User + system ticks of process `pid` (fields 14 and 15 of `/proc/PID/stat`, counted after
/// the command name, which may hold spaces and parentheses).
fn ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = stat.get(stat.rfind(')')? + 2..)?;
    let mut fields = rest.split(' ').skip(11);
    let user: u64 = fields.next()?.parse().ok()?;
    let system: u64 = fields.next()?.parse().ok()?;
    Some(user + system)
}

impl Cpu {
    pub(crate) fn of(pids: impl IntoIterator<Item = u32>) -> Cpu {
        Cpu(pids
            .into_iter()
            .filter_map(|pid| ticks(pid).map(|t| (pid, t)))
            .collect())
    }

    /// Milliseconds of CPU spent since `before` (a process first seen now counts from zero),
    /// per cycle of `cycles`.
    pub(crate) fn ms_per_cycle(&self, before: &Cpu, cycles: usize) -> f64 {
        let spent: u64 = self
            .0
            .iter()
            .map(|(pid, t)| t.saturating_sub(before.0.get(pid).copied().unwrap_or(0)))
            .sum();
        spent as f64 / ticks_per_second() * 1000.0 / cycles.max(1) as f64
    }
}

/// The process ids of the server backends connected to database `name`.
pub(crate) async fn backends(
    db: &tokio_postgres::Client,
    name: &str,
) -> Result<Vec<u32>, tokio_postgres::Error> {
    let rows = db
        .query(
            "SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()",
            &[&name],
        )
        .await?;
    Ok(rows
        .iter()
        .filter_map(|r| u32::try_from(r.get::<_, i32>(0)).ok())
        .collect())
}
