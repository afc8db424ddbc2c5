//! A process and its children as `/proc` shows them: the children of a pid, and the CPU a
//! server's whole tree used (PostgreSQL's postmaster, its backends and its background workers,
//! with the CPU of the children that already exited, which the postmaster reaped).

/// The fields of `/proc/<pid>/stat` after the command name (the name may hold spaces).
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = stat.get(stat.rfind(')')? + 2..)?;
    Some(after.split_whitespace().map(str::to_string).collect())
}

/// The pids whose parent is `pid`.
pub fn children_of(pid: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&child| {
            stat_fields(child)
                .and_then(|f| f.get(1)?.parse::<u32>().ok())
                .is_some_and(|parent| parent == pid)
        })
        .collect()
}

/// CPU seconds of `pid` and its live children, plus the children it has reaped (`cutime`,
/// `cstime`): the whole of a server that forks a process per session. `None` when `pid` is gone.
pub fn tree_cpu_seconds(pid: u32) -> Option<f64> {
    let ticks = |f: &[String], range: std::ops::Range<usize>| -> f64 {
        range
            .filter_map(|i| f.get(i)?.parse::<f64>().ok())
            .sum::<f64>()
    };
    let own = stat_fields(pid)?;
    let mut total = ticks(&own, 11..15);
    for child in children_of(pid) {
        if let Some(f) = stat_fields(child) {
            total += ticks(&f, 11..13);
        }
    }
    Some(total / ticks_per_second())
}

fn ticks_per_second() -> f64 {
    static TICKS: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
            .unwrap_or(100.0)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_is_found_and_its_tree_burns_cpu() {
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let me = std::process::id();
        assert!(children_of(me).contains(&child.id()));
        let before = tree_cpu_seconds(me).unwrap();
        let mut x = 0u64;
        for i in 0..30_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        assert!(tree_cpu_seconds(me).unwrap() >= before);
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(tree_cpu_seconds(u32::MAX).is_none());
    }
}
