//! The machine's CPU as its kernel accounts it (`/proc/stat`): above all *steal*, the time a
//! virtual machine's CPUs were ready to run but the host ran something else. On a shared host
//! steal comes and goes with the neighbours, and a latency-bound chain (a flush, a commit, a
//! consumer's round trip) stalls whenever one of its CPUs is taken away, so a round measured
//! under steal is slower for reasons outside the systems under test. The share is recorded with
//! every round (`host_steal_share`) so that a figure that moved can be told from a host that did.

/// The machine's CPU time at one instant, in the kernel's ticks, all CPUs together.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HostCpu {
    /// Every state: user, nice, system, idle, iowait, irq, softirq and steal.
    pub total: f64,
    pub steal: f64,
}

impl HostCpu {
    /// Reads `/proc/stat` now (none where there is no such file or it has no steal column).
    pub fn read() -> Option<HostCpu> {
        parse(&std::fs::read_to_string("/proc/stat").ok()?)
    }

    /// The share of the CPU time between `earlier` and this reading that the host took (NaN
    /// when either reading is missing or no time passed).
    pub fn steal_share_since(later: Option<HostCpu>, earlier: Option<HostCpu>) -> f64 {
        match (later, earlier) {
            (Some(b), Some(a)) if b.total > a.total => (b.steal - a.steal) / (b.total - a.total),
            _ => f64::NAN,
        }
    }
}

/// The aggregate `cpu` line of `/proc/stat`: `cpu user nice system idle iowait irq softirq
/// steal guest guest_nice` (guest time is already counted in user and nice).
fn parse(stat: &str) -> Option<HostCpu> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let ticks: Vec<f64> = line
        .split_whitespace()
        .skip(1)
        .map(|f| f.parse::<f64>())
        .collect::<Result<_, _>>()
        .ok()?;
    let steal = *ticks.get(7)?;
    Some(HostCpu {
        total: ticks[..8].iter().sum(),
        steal,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "cpu  4705 150 1120 16250 520 0 30 225 0 0\n\
                        cpu0 2352 75 560 8125 260 0 15 112 0 0\n\
                        intr 1234 0 0\n";

    #[test]
    fn the_aggregate_line_gives_every_state_and_steal() {
        let h = parse(STAT).unwrap();
        assert_eq!(h.steal, 225.0);
        assert_eq!(
            h.total,
            4705.0 + 150.0 + 1120.0 + 16250.0 + 520.0 + 30.0 + 225.0
        );
    }

    #[test]
    fn steal_share_is_the_steal_of_the_time_between_two_readings() {
        let a = HostCpu {
            total: 1000.0,
            steal: 10.0,
        };
        let b = HostCpu {
            total: 1200.0,
            steal: 40.0,
        };
        assert_eq!(HostCpu::steal_share_since(Some(b), Some(a)), 0.15);
        assert!(HostCpu::steal_share_since(Some(b), None).is_nan());
        assert!(HostCpu::steal_share_since(Some(a), Some(a)).is_nan());
    }

    #[test]
    fn a_kernel_without_a_steal_column_reads_as_none() {
        assert_eq!(parse("cpu  1 2 3 4 5 6 7\n"), None);
        assert_eq!(parse("intr 1 2\n"), None);
        assert_eq!(parse("cpu  1 x 3 4 5 6 7 8\n"), None);
    }

    #[test]
    fn this_machine_has_one() {
        // The suite runs on Linux: the reading exists and its shares are shares.
        let a = HostCpu::read().expect("/proc/stat with a steal column");
        assert!(a.total > 0.0 && a.steal >= 0.0 && a.steal <= a.total);
    }
}
