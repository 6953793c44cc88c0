//! The reference model: every committed value of every key, in commit
//! order. The simulator commits a transaction's writes here at the moment
//! the data node emits its commit confirmation, so the model's order is the
//! node's commit order (message delays only change when clients hear it).

/// A row's non-key columns: `v BIGINT NOT NULL`, `s VARCHAR(16) NULL`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    pub v: i64,
    pub s: Option<String>,
}

/// `None` = the key has no row.
pub type Image = Option<Row>;

pub struct Model {
    /// Number of commits so far; a commit's writes carry its number.
    seq: u64,
    /// Per key: (commit seq, image) in commit order; starts with (0, None).
    history: Vec<Vec<(u64, Image)>>,
    /// The epoch of each commit, by seq (index 0: the empty start).
    epochs: Vec<u64>,
    /// The commits each commit depends on (the latest commits of the
    /// keys it locked), by seq.
    deps: Vec<Vec<u64>>,
}

impl Model {
    pub fn new(keys: u32) -> Model {
        Model {
            seq: 0,
            history: (0..keys).map(|_| vec![(0, None)]).collect(),
            epochs: vec![0],
            deps: vec![Vec::new()],
        }
    }

    /// The number of the latest commit (a point in the model's history).
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// What `key` held at the end of `epoch`: its latest commit of that
    /// epoch or an earlier one (commits of a key come in epoch order).
    pub fn image_at_epoch(&self, key: u32, epoch: u64) -> Image {
        let h = &self.history[key as usize];
        h.iter()
            .rev()
            .find(|(seq, _)| self.epochs[*seq as usize] <= epoch)
            .and_then(|(_, image)| image.clone())
    }

    /// The number of the latest commit that wrote `key` (0: none).
    pub fn latest_seq(&self, key: u32) -> u64 {
        self.history[key as usize].last().expect("never empty").0
    }

    /// Every (commit, image) of `key`, oldest first (for failure messages).
    pub fn history(&self, key: u32) -> &[(u64, Image)] {
        &self.history[key as usize]
    }

    pub fn current(&self, key: u32) -> &Image {
        &self.history[key as usize].last().expect("never empty").1
    }

    /// Whether the key held `image` at some point between commit `since`
    /// and now: what a read that took no lock may have seen if it ran
    /// anywhere in that window.
    pub fn held_since(&self, key: u32, since: u64, image: &Image) -> bool {
        let h = &self.history[key as usize];
        // The entry in force at `since` is the last one with seq <= since.
        let first = h
            .partition_point(|(seq, _)| *seq <= since)
            .saturating_sub(1);
        h[first..].iter().any(|(_, i)| i == image)
    }

    /// The keys the model holds.
    pub fn keys(&self) -> u32 {
        self.history.len() as u32
    }

    /// The images `key` held from commit `since` on: the one in force at
    /// `since`, then every later one.
    pub fn history_since(&self, key: u32, since: u64) -> &[(u64, Image)] {
        let h = &self.history[key as usize];
        let first = h
            .partition_point(|(seq, _)| *seq <= since)
            .saturating_sub(1);
        &h[first..]
    }

    /// Whether the key had a row (any image) at some point between commit
    /// `since` and now.
    pub fn existed_since(&self, key: u32, since: u64) -> bool {
        let h = &self.history[key as usize];
        let first = h
            .partition_point(|(seq, _)| *seq <= since)
            .saturating_sub(1);
        h[first..].iter().any(|(_, i)| i.is_some())
    }

    /// Applies one committed transaction's final images (committed in
    /// `epoch`).
    pub fn commit(&mut self, epoch: u64, writes: impl IntoIterator<Item = (u32, Image)>) {
        self.commit_after(epoch, writes, &[])
            .expect("a commit without locks depends on nothing");
    }

    /// [`Model::commit`] of a transaction that saw (or overwrote) commits
    /// `seen`, so it depends on them. Fails if one of those commits is of
    /// a later epoch than `epoch`: epochs would not be a consistent cut.
    pub fn commit_after(
        &mut self,
        epoch: u64,
        writes: impl IntoIterator<Item = (u32, Image)>,
        seen: &[u64],
    ) -> Result<(), String> {
        let deps: Vec<u64> = seen.iter().copied().filter(|&seq| seq != 0).collect();
        if let Some(&d) = deps.iter().find(|&&d| self.epochs[d as usize] > epoch) {
            return Err(format!(
                "commit #{} is in epoch {epoch}, but it saw commit #{d} of epoch {}: a transaction landed in an earlier epoch than one it depended on",
                self.seq + 1,
                self.epochs[d as usize]
            ));
        }
        self.deps.push(deps);
        self.seq += 1;
        self.epochs.push(epoch);
        for (key, image) in writes {
            self.history[key as usize].push((self.seq, image));
        }
        Ok(())
    }

    /// Takes back commit `seq` (its replicas all failed before any other
    /// held it, and the takeover aborted it). No later commit wrote its
    /// keys: they were locked until its end.
    pub fn uncommit(&mut self, seq: u64) {
        for h in &mut self.history {
            h.retain(|(s, _)| *s != seq);
        }
    }

    /// The cluster restarted from the end of `epoch`: commits of later
    /// epochs never happened. They must be the last ones of every key they
    /// wrote (a commit of a later epoch followed by a kept one would mean
    /// the restart kept a transaction without one whose write it
    /// overwrote: epochs are not a consistent cut).
    pub fn restart_at_epoch(&mut self, epoch: u64) -> Result<(), String> {
        for (seq, deps) in self.deps.iter().enumerate() {
            if self.epochs[seq] > epoch {
                continue;
            }
            if let Some(&d) = deps.iter().find(|&&d| self.epochs[d as usize] > epoch) {
                return Err(format!(
                    "restarting at epoch {epoch}: commit #{seq} (epoch {}) saw commit #{d} (epoch {}), which the restart drops: a transaction landed in an earlier epoch than one it depended on",
                    self.epochs[seq], self.epochs[d as usize]
                ));
            }
        }
        for (key, h) in self.history.iter_mut().enumerate() {
            let kept = |seq: u64| self.epochs[seq as usize] <= epoch;
            if let Some(first_dropped) = h.iter().position(|&(seq, _)| !kept(seq)) {
                if let Some(&(later, _)) = h[first_dropped..].iter().find(|&&(seq, _)| kept(seq)) {
                    let dropped = h[first_dropped].0;
                    return Err(format!(
                        "restarting at epoch {epoch}: key {key} was written by commit #{dropped} (epoch {}) and then by commit #{later} (epoch {}): a transaction landed in an earlier epoch than one it followed",
                        self.epochs[dropped as usize], self.epochs[later as usize]
                    ));
                }
                h.truncate(first_dropped);
            }
        }
        Ok(())
    }

    /// Rows that exist now.
    pub fn row_count(&self) -> u64 {
        (0..self.history.len() as u32)
            .filter(|k| self.current(*k).is_some())
            .count() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(v: i64) -> Image {
        Some(Row { v, s: None })
    }

    #[test]
    fn windows_cover_the_value_in_force_and_later_ones() {
        let mut m = Model::new(2);
        m.commit(0, [(0, row(1))]); // seq 1
        m.commit(0, [(1, row(5))]); // seq 2
        m.commit(0, [(0, row(2))]); // seq 3
        assert_eq!(m.current(0), &row(2));
        assert!(m.held_since(0, 0, &None));
        assert!(m.held_since(0, 2, &row(1)), "in force at seq 2");
        assert!(m.held_since(0, 2, &row(2)), "committed later");
        assert!(!m.held_since(0, 2, &None), "gone before seq 2");
        assert!(!m.held_since(0, 3, &row(1)));
        assert!(m.held_since(1, 1, &None));
        assert_eq!(m.row_count(), 2);
    }

    #[test]
    fn a_restart_keeps_the_epochs_up_to_its_own_and_checks_their_order() {
        let mut m = Model::new(2);
        m.commit(1, [(0, row(1))]);
        m.commit(2, [(0, row(2)), (1, row(7))]);
        m.commit(3, [(1, row(8))]);
        m.restart_at_epoch(2).expect("in epoch order");
        assert_eq!(m.current(0), &row(2));
        assert_eq!(m.current(1), &row(7));

        let mut bad = Model::new(1);
        bad.commit(5, [(0, row(1))]);
        bad.commit(4, [(0, row(2))]);
        let err = bad.restart_at_epoch(4).expect_err("out of epoch order");
        assert!(err.contains("earlier epoch"), "{err}");
    }
}
