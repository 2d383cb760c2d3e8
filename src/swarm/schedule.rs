//! Scheduling: which tasks may run together. Dependencies give Kahn waves and a critical path;
//! claims (the files a task may write) must never overlap between tasks in flight.
//!
//! Pure. Glob overlap is decided conservatively: when two patterns might match a common path,
//! they overlap.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use super::plan::{by_key, compile_glob, Plan, Task};

const META: &[char] = &['*', '?', '[', '{', '\\'];

fn literal_prefix(pattern: &str) -> &str {
    match pattern.find(META) {
        Some(i) => &pattern[..i],
        None => pattern,
    }
}

fn is_literal(pattern: &str) -> bool {
    !pattern.contains(META)
}

/// Whether `a` is `b` or a directory containing it (component-wise).
fn contains_path(dir: &str, path: &str) -> bool {
    let dir = dir.trim_end_matches('/');
    path == dir
        || path
            .strip_prefix(dir)
            .is_some_and(|rest| rest.starts_with('/'))
}

thread_local! {
    /// Compiled claim globs: scheduling asks about the same few patterns many times.
    static GLOBS: std::cell::RefCell<BTreeMap<String, Option<globset::GlobMatcher>>> =
        const { std::cell::RefCell::new(BTreeMap::new()) };
}

/// Whether `glob` matches `path`; an unparseable glob matches everything (conservative).
fn glob_matches(glob: &str, path: &str) -> bool {
    GLOBS.with(|cache| {
        let mut cache = cache.borrow_mut();
        let m = cache
            .entry(glob.to_string())
            .or_insert_with(|| compile_glob(glob).ok());
        m.as_ref().is_none_or(|m| m.is_match(path))
    })
}

/// Whether two claim patterns might match a common path. Conservative: never says "no" when a
/// common path exists.
pub fn patterns_overlap(a: &str, b: &str) -> bool {
    match (is_literal(a), is_literal(b)) {
        (true, true) => contains_path(a, b) || contains_path(b, a),
        (true, false) | (false, true) => {
            let (lit, glob) = if is_literal(a) { (a, b) } else { (b, a) };
            // The glob matches the literal path, or (the literal being possibly a directory)
            // something below it.
            let under = format!("{}/", lit.trim_end_matches('/'));
            let prefix = literal_prefix(glob);
            // Without `**` a glob matches paths of exactly its own depth only.
            let deep_enough =
                glob.contains("**") || glob.split('/').count() > lit.split('/').count();
            glob_matches(glob, lit)
                || (deep_enough && (prefix.starts_with(&under) || under.starts_with(prefix)))
        }
        (false, false) => {
            let (pa, pb) = (literal_prefix(a), literal_prefix(b));
            pa.starts_with(pb) || pb.starts_with(pa)
        }
    }
}

/// The first path component every path a claim can match starts with, when it is fixed.
fn claim_bucket(claim: &str) -> Option<&str> {
    let prefix = literal_prefix(claim);
    match prefix.find('/') {
        Some(i) => Some(&prefix[..i]),
        None if is_literal(claim) => Some(claim.trim_end_matches('/')),
        None => None,
    }
}

/// Whether two tasks' claims overlap.
pub fn claims_overlap(a: &Task, b: &Task) -> bool {
    a.files
        .iter()
        .any(|x| b.files.iter().any(|y| patterns_overlap(x, y)))
}

/// Where dependency cycles are found: with the plans, which `plan::validate` refuses for one.
pub use super::plan::find_cycle;

type Indegree<'a> = BTreeMap<&'a str, usize>;
type Dependents<'a> = BTreeMap<&'a str, Vec<&'a str>>;

/// Each task's number of known dependencies, and who depends on each task.
fn graph<'a>(tasks: &BTreeMap<&'a str, &'a Task>) -> (Indegree<'a>, Dependents<'a>) {
    let mut indegree = BTreeMap::new();
    let mut dependents: Dependents<'a> = BTreeMap::new();
    for (k, t) in tasks {
        let deps: Vec<&'a str> = t
            .depends_on
            .iter()
            .map(String::as_str)
            .filter(|d| tasks.contains_key(d))
            .collect();
        indegree.insert(*k, deps.len());
        for d in deps {
            dependents.entry(d).or_default().push(*k);
        }
    }
    (indegree, dependents)
}

/// Kahn's algorithm across all plans: each wave holds the tasks whose dependencies are all in
/// earlier waves. Assumes no cycle (validate first).
pub fn waves(plans: &[Plan]) -> Vec<Vec<String>> {
    let tasks = by_key(plans);
    let (mut indegree, dependents) = graph(&tasks);
    let mut current: Vec<&str> = indegree
        .iter()
        .filter(|(_, n)| **n == 0)
        .map(|(k, _)| *k)
        .collect();
    let mut out = Vec::new();
    while !current.is_empty() {
        let mut next = Vec::new();
        for k in &current {
            for d in dependents.get(k).into_iter().flatten() {
                let n = indegree.get_mut(d).expect("every dependent is indexed");
                *n -= 1;
                if *n == 0 {
                    next.push(*d);
                }
            }
        }
        next.sort_unstable();
        out.push(current.iter().map(|s| s.to_string()).collect());
        current = next;
    }
    out
}

/// The longest dependency chain (by task count), earliest first.
pub fn critical_path(plans: &[Plan], waves: &[Vec<String>]) -> Vec<String> {
    let tasks = by_key(plans);
    let mut best: BTreeMap<&str, (usize, Option<&str>)> = BTreeMap::new();
    for wave in waves {
        for k in wave {
            let t = tasks[k.as_str()];
            let prev = t
                .depends_on
                .iter()
                .filter_map(|d| best.get_key_value(d.as_str()).map(|(dk, v)| (*dk, v.0)))
                .max_by_key(|(_, len)| *len);
            let entry = match prev {
                Some((d, len)) => (len + 1, Some(d)),
                None => (1, None),
            };
            best.insert(tasks.get_key_value(k.as_str()).expect("indexed").0, entry);
        }
    }
    let Some((mut at, _)) = best.iter().max_by_key(|(_, v)| v.0).map(|(k, v)| (*k, v.0)) else {
        return Vec::new();
    };
    let mut path = vec![at.to_string()];
    while let Some(Some(prev)) = best.get(at).map(|v| v.1) {
        path.push(prev.to_string());
        at = prev;
    }
    path.reverse();
    path
}

/// Groups of tasks in the same wave whose claims overlap: they will run one after another.
pub fn serialised(plans: &[Plan], waves: &[Vec<String>]) -> Vec<Vec<String>> {
    let tasks = by_key(plans);
    let mut groups = Vec::new();
    for wave in waves {
        // Union-find over the wave by claim overlap.
        let n = wave.len();
        let mut parent: Vec<usize> = (0..n).collect();
        fn find(p: &mut [usize], i: usize) -> usize {
            let mut r = i;
            while p[r] != r {
                r = p[r];
            }
            p[i] = r;
            r
        }
        // Only tasks that share a claim's first path component (or claim something whose first
        // component is not fixed) can overlap: compare those pairs only.
        let mut buckets: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        let mut anywhere: Vec<usize> = Vec::new();
        for (i, k) in wave.iter().enumerate() {
            for claim in &tasks[k.as_str()].files {
                match claim_bucket(claim) {
                    Some(b) => buckets.entry(b).or_default().push(i),
                    None => anywhere.push(i),
                }
            }
        }
        let mut pairs: BTreeSet<(usize, usize)> = BTreeSet::new();
        for members in buckets.values() {
            for (x, &i) in members.iter().enumerate() {
                for &j in &members[x + 1..] {
                    pairs.insert((i.min(j), i.max(j)));
                }
            }
        }
        for &i in &anywhere {
            for j in 0..n {
                if i != j {
                    pairs.insert((i.min(j), i.max(j)));
                }
            }
        }
        for (i, j) in pairs {
            if claims_overlap(tasks[wave[i].as_str()], tasks[wave[j].as_str()]) {
                let (a, b) = (find(&mut parent, i), find(&mut parent, j));
                parent[a] = b;
            }
        }
        let mut by_root: BTreeMap<usize, Vec<String>> = BTreeMap::new();
        for (i, k) in wave.iter().enumerate() {
            let r = find(&mut parent, i);
            by_root.entry(r).or_default().push(k.clone());
        }
        groups.extend(by_root.into_values().filter(|g| g.len() > 1));
    }
    groups
}

/// The tasks that may start now: every dependency succeeded, and no claim overlaps a claim of a
/// task in flight (nor of another task picked in the same call).
pub fn next_runnable<'a>(
    plans: &'a [Plan],
    completed: &BTreeSet<String>,
    in_flight: &BTreeSet<String>,
    limit: usize,
) -> Vec<&'a Task> {
    next_runnable_except(plans, completed, in_flight, &BTreeSet::new(), limit)
}

/// [`next_runnable`], never picking a task in `skip` (failed or blocked ones).
pub fn next_runnable_except<'a>(
    plans: &'a [Plan],
    completed: &BTreeSet<String>,
    in_flight: &BTreeSet<String>,
    skip: &BTreeSet<String>,
    limit: usize,
) -> Vec<&'a Task> {
    let tasks = by_key(plans);
    let mut held: Vec<&Task> = in_flight
        .iter()
        .filter_map(|k| tasks.get(k.as_str()).copied())
        .collect();
    let free = limit.saturating_sub(in_flight.len());
    let mut picked = Vec::new();
    for t in plans.iter().flat_map(|p| p.tasks.iter()) {
        if picked.len() >= free {
            break;
        }
        if completed.contains(&t.key) || in_flight.contains(&t.key) || skip.contains(&t.key) {
            continue;
        }
        if !t.depends_on.iter().all(|d| completed.contains(d)) {
            continue;
        }
        if held.iter().any(|h| claims_overlap(h, t)) {
            continue;
        }
        held.push(t);
        picked.push(t);
    }
    picked
}

/// Simulates running every task with unit duration at `parallelism`, honouring dependencies and
/// claims; returns the number of steps (the makespan). Ready tasks are tracked incrementally, so
/// the cost grows with tasks × parallelism, not tasks².
pub fn simulate(plans: &[Plan], parallelism: usize) -> usize {
    let tasks = by_key(plans);
    let (mut indegree, dependents) = graph(&tasks);
    let mut ready: VecDeque<&str> = indegree
        .iter()
        .filter(|(_, n)| **n == 0)
        .map(|(k, _)| *k)
        .collect();
    let mut steps = 0;
    let parallelism = parallelism.max(1);
    while !ready.is_empty() {
        let mut running: Vec<&Task> = Vec::new();
        let mut deferred = VecDeque::new();
        while let Some(k) = ready.pop_front() {
            let t = tasks[k];
            if running.len() < parallelism && !running.iter().any(|r| claims_overlap(r, t)) {
                running.push(t);
            } else {
                deferred.push_back(k);
            }
            if running.len() == parallelism {
                break;
            }
        }
        deferred.extend(ready.drain(..));
        ready = deferred;
        for t in &running {
            for d in dependents.get(t.key.as_str()).into_iter().flatten() {
                let n = indegree.get_mut(d).expect("every dependent is indexed");
                *n -= 1;
                if *n == 0 {
                    ready.push_back(d);
                }
            }
        }
        steps += 1;
    }
    steps
}
