//! Confining PostgreSQL and the broker to a number of cores (`taskset`), so a sweep can measure
//! what each setting sustains on one core and on two. PostgreSQL gets the machine's first cores
//! (`0..n`), the broker its last ones; the load generator is never confined. New backends
//! inherit the postmaster's mask, and new threads their creator's.

use std::process::Command;

use crate::measure::process_tree::children_of;

/// The cores this process may run on (its affinity mask).
pub fn available_cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The CPU list of the first `n` cores, or the last `n` (`0`, `0,1`, `1`).
pub fn cpu_list(n: usize, from_end: bool) -> Result<String, String> {
    let total = available_cores();
    if n == 0 || n > total {
        return Err(format!(
            "cannot confine a process to {n} cores: this machine offers {total}"
        ));
    }
    let first = if from_end { total - n } else { 0 };
    let cpus: Vec<String> = (first..first + n).map(|c| c.to_string()).collect();
    Ok(cpus.join(","))
}

/// Sets the affinity of `pid` (all its threads) to `cpus`; with `children`, of each child too.
pub fn confine(pid: u32, cpus: &str, children: bool) -> Result<(), String> {
    let mut pids = vec![pid];
    if children {
        pids.extend(children_of(pid));
    }
    for p in pids {
        let out = Command::new("taskset")
            .args(["-a", "-p", "-c", cpus, &p.to_string()])
            .output()
            .map_err(|e| format!("taskset (util-linux) is needed to confine processes: {e}"))?;
        // A child may exit between the listing and taskset: only the parent must succeed.
        if !out.status.success() && p == pid {
            return Err(format!(
                "taskset -a -p -c {cpus} {p}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
    }
    Ok(())
}

/// The CPU list `pid` may run on, as `taskset -p` prints it.
pub fn affinity_of(pid: u32) -> Result<String, String> {
    let out = Command::new("taskset")
        .args(["-c", "-p", &pid.to_string()])
        .output()
        .map_err(|e| format!("taskset: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.rsplit(": ")
        .next()
        .map(|s| s.trim().to_string())
        .ok_or_else(|| format!("taskset -c -p {pid}: {text}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `0-2,5` -> [0, 1, 2, 5].
    fn cpus(list: &str) -> Vec<usize> {
        list.split(',')
            .flat_map(|part| match part.split_once('-') {
                Some((a, b)) => (a.parse().unwrap()..=b.parse().unwrap()).collect(),
                None => vec![part.parse().unwrap()],
            })
            .collect()
    }

    #[test]
    fn a_child_is_confined_and_set_free_again() {
        let mut child = Command::new("sleep").arg("5").spawn().unwrap();
        let last = cpu_list(1, true).unwrap();
        confine(child.id(), &last, false).unwrap();
        assert_eq!(cpus(&affinity_of(child.id()).unwrap()), cpus(&last));
        let all = cpu_list(available_cores(), false).unwrap();
        confine(child.id(), &all, false).unwrap();
        assert_eq!(cpus(&affinity_of(child.id()).unwrap()), cpus(&all));
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(cpu_list(0, false).is_err() && cpu_list(available_cores() + 1, false).is_err());
    }
}
