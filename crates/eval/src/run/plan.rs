//! Which samples a run evaluates, and how `--shard i/n` splits them.

use std::fmt;
use std::str::FromStr;

use crate::run::error::RunError;
use crate::task::TaskName;

/// One sample to evaluate: the key of a predictions line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WorkItem {
    pub length: usize,
    pub task: TaskName,
    pub index: usize,
}

/// `--shard i/n`: this machine runs every n-th sample of the full plan, starting at i.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub index: usize,
    pub count: usize,
}

impl Shard {
    /// The whole plan (`0/1`).
    pub const ALL: Shard = Shard { index: 0, count: 1 };

    pub fn holds(self, position: usize) -> bool {
        position % self.count == self.index
    }
}

impl FromStr for Shard {
    type Err = RunError;
    fn from_str(s: &str) -> Result<Shard, RunError> {
        let bad = || RunError::BadShard(s.to_string());
        let (i, n) = s.split_once('/').ok_or_else(bad)?;
        let index: usize = i.trim().parse().map_err(|_| bad())?;
        let count: usize = n.trim().parse().map_err(|_| bad())?;
        if count == 0 || index >= count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// The full plan in a fixed order (length, then RULER's task order, then sample index), cut
/// to `shard` round-robin. Round-robin spreads every length over all shards, so shards take
/// about equally long; the order depends only on the arguments, so every machine of a sweep
/// computes the same split without talking to the others.
pub fn plan(tasks: &[TaskName], lengths: &[usize], samples: usize, shard: Shard) -> Vec<WorkItem> {
    let mut lengths = lengths.to_vec();
    lengths.sort_unstable();
    lengths.dedup();
    let mut tasks = tasks.to_vec();
    tasks.sort_unstable();
    tasks.dedup();
    let full = lengths.iter().flat_map(|&length| {
        tasks.iter().flat_map(move |&task| {
            (0..samples).map(move |index| WorkItem {
                length,
                task,
                index,
            })
        })
    });
    full.enumerate()
        .filter(|(position, _)| shard.holds(*position))
        .map(|(_, item)| item)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_partition_the_plan() {
        let tasks = [TaskName::Vt, TaskName::NiahSingle1, TaskName::Cwe];
        let full = plan(&tasks, &[2048, 1024], 5, Shard::ALL);
        assert_eq!(full.len(), 30);
        assert_eq!(full[0].length, 1024);
        assert_eq!(full[0].task, TaskName::NiahSingle1);
        let mut union: Vec<WorkItem> = (0..4)
            .flat_map(|i| plan(&tasks, &[1024, 2048], 5, Shard { index: i, count: 4 }))
            .collect();
        union.sort();
        let mut sorted = full.clone();
        sorted.sort();
        assert_eq!(union, sorted);
    }

    #[test]
    fn shard_parsing() {
        assert_eq!(
            "1/3".parse::<Shard>().unwrap(),
            Shard { index: 1, count: 3 }
        );
        for bad in ["3/3", "1", "a/2", "0/0", "-1/2"] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
    }
}
