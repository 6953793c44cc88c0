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
}

impl Model {
    pub fn new(keys: u32) -> Model {
        Model {
            seq: 0,
            history: (0..keys).map(|_| vec![(0, None)]).collect(),
        }
    }

    /// The number of the latest commit (a point in the model's history).
    pub fn seq(&self) -> u64 {
        self.seq
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

    /// Whether the key had a row (any image) at some point between commit
    /// `since` and now.
    pub fn existed_since(&self, key: u32, since: u64) -> bool {
        let h = &self.history[key as usize];
        let first = h
            .partition_point(|(seq, _)| *seq <= since)
            .saturating_sub(1);
        h[first..].iter().any(|(_, i)| i.is_some())
    }

    /// Applies one committed transaction's final images.
    pub fn commit(&mut self, writes: impl IntoIterator<Item = (u32, Image)>) {
        self.seq += 1;
        for (key, image) in writes {
            self.history[key as usize].push((self.seq, image));
        }
    }

    /// Takes back commit `seq` (its replicas all failed before any other
    /// held it, and the takeover aborted it). No later commit wrote its
    /// keys: they were locked until its end.
    pub fn uncommit(&mut self, seq: u64) {
        for h in &mut self.history {
            h.retain(|(s, _)| *s != seq);
        }
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
        m.commit([(0, row(1))]); // seq 1
        m.commit([(1, row(5))]); // seq 2
        m.commit([(0, row(2))]); // seq 3
        assert_eq!(m.current(0), &row(2));
        assert!(m.held_since(0, 0, &None));
        assert!(m.held_since(0, 2, &row(1)), "in force at seq 2");
        assert!(m.held_since(0, 2, &row(2)), "committed later");
        assert!(!m.held_since(0, 2, &None), "gone before seq 2");
        assert!(!m.held_since(0, 3, &row(1)));
        assert!(m.held_since(1, 1, &None));
        assert_eq!(m.row_count(), 2);
    }
}
