//! Memory: what a run needs, what there is, and the check of one against
//! the other before anything large is allocated.
//!
//! [`run_bytes`] is the one estimate of the bytes a command holds at its
//! peak. [`available`] reads what the process may still allocate: the
//! cgroup's limit less its usage (cgroup v2 `memory.max` and
//! `memory.current`, or v1 `memory.limit_in_bytes` and
//! `memory.usage_in_bytes`, at every level up to the root), the address
//! space limit (`ulimit -v`) less the process's size, and `MemAvailable`
//! from `/proc/meminfo`, whichever is least. `--memory-limit` replaces it.
//!
//! ```
//! use shapec::memory::parse_size;
//! assert_eq!(parse_size("2G"), Ok(2 << 30));
//! assert_eq!(parse_size("512MiB"), Ok(512 << 20));
//! assert_eq!(parse_size("1000"), Ok(1000));
//! assert!(parse_size("-1").is_err());
//! ```

use std::path::{Path, PathBuf};

use shape_graph::{GraphError, SolvedGraph, TensorId};
use shape_run::RunPlan;

/// Memory the process may use, and where the figure comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Budget {
    /// Bytes.
    pub bytes: u64,
    /// Where the figure comes from, for messages.
    pub source: String,
}

/// Reads a size in bytes: digits with an optional binary suffix `K`, `M`,
/// `G`, `T` or `P` (powers of 1024), optionally followed by `B` or `iB`.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let upper = t.to_ascii_uppercase();
    let body = upper
        .strip_suffix("IB")
        .or_else(|| upper.strip_suffix('B'))
        .unwrap_or(&upper);
    let (digits, shift) = match body.chars().last() {
        Some('K') => (&body[..body.len() - 1], 10),
        Some('M') => (&body[..body.len() - 1], 20),
        Some('G') => (&body[..body.len() - 1], 30),
        Some('T') => (&body[..body.len() - 1], 40),
        Some('P') => (&body[..body.len() - 1], 50),
        _ => (body, 0),
    };
    let n: u64 = digits
        .trim()
        .parse()
        .map_err(|_| format!("expected a size like 2G, 512M or 1000000 (bytes), found `{text}`"))?;
    n.checked_mul(1 << shift)
        .ok_or_else(|| format!("the size `{text}` is more than 2^64 bytes"))
}

/// What a command runs: one run, or a run on the reference CPU path and a
/// second run on another backend whose results are compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Runs {
    /// `shapec run`.
    Once,
    /// `shapec diff`.
    Compared,
}

fn tensor_bytes(solved: &SolvedGraph, t: TensorId) -> Result<u128, GraphError> {
    // A ragged tensor's length comes with its data.
    if solved.is_ragged(t)? {
        return Ok(0);
    }
    Ok(solved
        .shape(t)?
        .num_elems()
        .map_or(u128::MAX, |n| n.saturating_mul(4)))
}

/// The bytes a command holds at its peak. A run holds what its plan says
/// ([`RunPlan::peak_bytes`]: the data of the inputs, parameters and
/// constants it reads until their last use, live results and scratch,
/// freed buffers kept for reuse, and the outputs). A comparison
/// ([`Runs::Compared`]) runs the reference on a copy of the data and
/// keeps the reference's results while the second run runs: the larger of
/// the two is held beside a run.
pub fn run_bytes(solved: &SolvedGraph, plan: &RunPlan, runs: Runs) -> Result<u128, GraphError> {
    let extra = match runs {
        Runs::Once => 0,
        Runs::Compared => {
            let mut data = 0u128;
            for &t in plan.leaves() {
                data = data.saturating_add(tensor_bytes(solved, t)?);
            }
            let mut results = 0u128;
            for &t in plan.outputs() {
                results = results.saturating_add(tensor_bytes(solved, t)?);
            }
            data.max(results)
        }
    };
    Ok(plan.peak_bytes().saturating_add(extra))
}

/// [`run_bytes`] once the data is known: a plan with ragged tensors
/// counts their real bytes (values and offsets, from the rows `data`
/// gives: [`RunPlan::peak_bytes_for`]), and a comparison holds the
/// larger of the data and the reference's results as given or computed.
/// Without ragged tensors it is [`run_bytes`].
pub fn run_bytes_for(
    solved: &SolvedGraph,
    plan: &RunPlan,
    runs: Runs,
    data: &shape_run::Inputs,
) -> Result<u128, shape_run::RunError> {
    let mut ragged = false;
    for &t in plan.leaves().iter().chain(plan.outputs()) {
        ragged |= solved.is_ragged(t)?;
    }
    for op in plan.ops() {
        ragged |= op.ragged;
    }
    if !ragged {
        return Ok(run_bytes(solved, plan, runs)?);
    }
    let peak = plan.peak_bytes_for(solved, data)?;
    let extra = match runs {
        Runs::Once => 0,
        Runs::Compared => {
            let mut given = 0u128;
            for &t in plan.leaves() {
                given = given.saturating_add(match data.get(t) {
                    Some(d) => d.values().len() as u128 * 4,
                    None => tensor_bytes(solved, t)?,
                });
            }
            // The results are at most what the run holds at its peak.
            given.max(peak)
        }
    };
    Ok(peak.saturating_add(extra))
}

/// Refuses `needed` bytes for `what` (`this run`, ``this call of `f` ``)
/// past `limit` (`--memory-limit`), or past the memory available when no
/// limit is given.
pub fn check_budget(
    what: impl FnOnce() -> String,
    needed: u128,
    limit: Option<u64>,
) -> Result<(), crate::CliError> {
    let budget = match limit {
        Some(bytes) => Some(Budget {
            bytes,
            source: "--memory-limit".into(),
        }),
        None => available(),
    };
    match budget {
        Some(b) if needed > u128::from(b.bytes) => Err(crate::CliError::OutOfMemory {
            what: what(),
            needed,
            budget: Some(b),
        }),
        _ => Ok(()),
    }
}

/// The least of every limit found; `None` when none can be read.
pub fn available() -> Option<Budget> {
    let mut found: Vec<Budget> = Vec::new();
    found.extend(cgroup_v2());
    found.extend(cgroup_v1());
    found.extend(address_space());
    found.extend(mem_available());
    found.into_iter().min_by_key(|b| b.bytes)
}

fn read_u64(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// The process's cgroup path for a controller (`""` for v2's unified
/// hierarchy), from `/proc/self/cgroup`.
fn cgroup_path(controller: &str) -> Option<String> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    text.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let matches = if controller.is_empty() {
            controllers.is_empty()
        } else {
            controllers.split(',').any(|c| c == controller)
        };
        matches.then(|| path.to_string())
    })
}

/// The directories to look in for a cgroup's files: the process's cgroup
/// and each of its parents under `root`, and `root` itself (what a
/// container sees of its own cgroup).
fn cgroup_dirs(root: &Path, path: &str) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    let mut p = Path::new(path.trim_start_matches('/'));
    loop {
        let d = root.join(p);
        if d.is_dir() && !dirs.contains(&d) {
            dirs.push(d);
        }
        match p.parent() {
            Some(parent) => p = parent,
            None => break,
        }
    }
    if root.is_dir() && !dirs.iter().any(|d| d == root) {
        dirs.push(root.to_path_buf());
    }
    dirs
}

/// Limit less usage at each level that has both files; the least.
fn cgroup_room(dirs: &[PathBuf], limit: &str, usage: &str, what: &str) -> Option<Budget> {
    dirs.iter()
        .filter_map(|d| {
            // "max" (v2) or a near-2^63 value (v1) means no limit.
            let max = read_u64(&d.join(limit)).filter(|&m| m < (1 << 62))?;
            let used = read_u64(&d.join(usage)).unwrap_or(0);
            Some(Budget {
                bytes: max.saturating_sub(used),
                source: format!(
                    "the {what} limit {max} less the {used} bytes in use ({})",
                    d.join(limit).display()
                ),
            })
        })
        .min_by_key(|b| b.bytes)
}

fn cgroup_v2() -> Option<Budget> {
    let path = cgroup_path("")?;
    let dirs = cgroup_dirs(Path::new("/sys/fs/cgroup"), &path);
    cgroup_room(&dirs, "memory.max", "memory.current", "cgroup")
}

fn cgroup_v1() -> Option<Budget> {
    let path = cgroup_path("memory")?;
    let dirs = cgroup_dirs(Path::new("/sys/fs/cgroup/memory"), &path);
    cgroup_room(
        &dirs,
        "memory.limit_in_bytes",
        "memory.usage_in_bytes",
        "cgroup",
    )
}

/// `ulimit -v` less the process's virtual size.
fn address_space() -> Option<Budget> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max address space"))?;
    let soft: u64 = line
        .trim_start_matches("Max address space")
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let size_kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmSize:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    let used = size_kb.saturating_mul(1024);
    Some(Budget {
        bytes: soft.saturating_sub(used),
        source: format!(
            "the address space limit {soft} less the process's {used} bytes (ulimit -v)"
        ),
    })
}

fn mem_available() -> Option<Budget> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kb: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(Budget {
        bytes: kb.saturating_mul(1024),
        source: "MemAvailable in /proc/meminfo".into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use shape_graph::Graph;
    use shape_run::{RunGraph, RunOptions};

    #[test]
    fn sizes() {
        assert_eq!(parse_size("0"), Ok(0));
        assert_eq!(parse_size("3k"), Ok(3 << 10));
        assert_eq!(parse_size("3KB"), Ok(3 << 10));
        assert_eq!(parse_size(" 1 T "), Ok(1 << 40));
        assert!(parse_size("").is_err());
        assert!(parse_size("1.5G").is_err());
        assert!(parse_size("99999999999T").unwrap_err().contains("2^64"));
    }

    #[test]
    fn a_chain_frees_what_it_no_longer_reads() {
        // x (4 KiB) -> a -> b -> y: the host copy of x, its upload, and at
        // most two results alive at once, then y downloaded.
        let mut g = Graph::new();
        let x = g.input("x", "1024").unwrap();
        let a = g.unary("relu", x).unwrap();
        let b = g.unary("exp", a).unwrap();
        let y = g.unary("neg", b).unwrap();
        let s = g.solve().unwrap();
        let k = 4096;
        let options = RunOptions::default();
        let plan = |outputs: &[TensorId]| s.plan(outputs, &options).unwrap();
        // x and a, then b in x's freed buffer, y in a's: two buffers.
        assert_eq!(run_bytes(&s, &plan(&[y]), Runs::Once).unwrap(), 2 * k);
        // Keeping every result: x is freed after a and reused by b.
        assert_eq!(run_bytes(&s, &plan(&[a, b, y]), Runs::Once).unwrap(), 3 * k);
        // The reference run's copy of x or its result, beside the run.
        assert_eq!(run_bytes(&s, &plan(&[y]), Runs::Compared).unwrap(), 3 * k);
    }

    #[test]
    fn limits_can_be_read_here() {
        // Linux always has /proc/meminfo; the least limit is no more.
        if let Some(m) = mem_available() {
            assert!(available().unwrap().bytes <= m.bytes);
        }
    }
}
