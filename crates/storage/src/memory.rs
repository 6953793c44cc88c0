//! Memory accounting against the node's configured `data_memory`.

/// Size of one row-store page (as in NDB, 32 KiB).
pub const PAGE_BYTES: usize = 32 * 1024;

/// The allocation did not fit in `data_memory`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutOfMemory {
    pub requested_bytes: usize,
    pub free_bytes: usize,
}

/// Spare pages kept at most ([`Memory::give_zeroed_pages`]): 16 MiB.
pub const SPARE_PAGES_MAX: usize = 512;

/// The node-wide memory budget. Single-threaded: one per data node worker.
#[derive(Debug)]
pub struct Memory {
    limit_bytes: usize,
    used_bytes: usize,
    /// Zeroed pages made ready elsewhere, taken by the next new row-store
    /// pages (not charged until taken: a store charges its pages).
    spare_pages: Vec<Box<[u8]>>,
}

impl Memory {
    pub fn new(limit_bytes: usize) -> Self {
        Memory {
            limit_bytes,
            used_bytes: 0,
            spare_pages: Vec::new(),
        }
    }

    /// Pages of [`PAGE_BYTES`] zero bytes for the next new row-store pages.
    /// A restart's file reader makes them on its own thread and writes a
    /// byte of every 4 KiB, so the kernel's page faults and zeroing happen
    /// there while this thread applies rows (a third of the applying
    /// thread's time for 1 KB rows, when it faulted its own pages). Beyond
    /// [`SPARE_PAGES_MAX`] kept, the rest are freed. A page of another
    /// size is a bug in the caller.
    pub fn give_zeroed_pages(&mut self, pages: Vec<Box<[u8]>>) {
        for page in pages {
            assert_eq!(page.len(), PAGE_BYTES, "a spare page of another size");
            debug_assert!(page.iter().all(|&b| b == 0), "a spare page not zeroed");
            if self.spare_pages.len() < SPARE_PAGES_MAX {
                self.spare_pages.push(page);
            }
        }
    }

    /// Frees the spare pages left.
    pub fn drop_spare_pages(&mut self) {
        self.spare_pages = Vec::new();
    }

    /// Spare pages held.
    pub fn spare_pages(&self) -> usize {
        self.spare_pages.len()
    }

    /// A zeroed page for a row store: a spare one if any, else fresh
    /// (zero pages come from the OS lazily). The store charges it.
    #[inline]
    pub(crate) fn new_page(&mut self) -> Box<[u8]> {
        self.spare_pages
            .pop()
            .unwrap_or_else(|| vec![0u8; PAGE_BYTES].into_boxed_slice())
    }

    pub fn limit_bytes(&self) -> usize {
        self.limit_bytes
    }

    pub fn used_bytes(&self) -> usize {
        self.used_bytes
    }

    pub fn free_bytes(&self) -> usize {
        self.limit_bytes - self.used_bytes
    }

    /// Charges `bytes` or fails without charging anything.
    pub fn try_charge(&mut self, bytes: usize) -> Result<(), OutOfMemory> {
        if bytes > self.free_bytes() {
            return Err(OutOfMemory {
                requested_bytes: bytes,
                free_bytes: self.free_bytes(),
            });
        }
        self.used_bytes += bytes;
        Ok(())
    }

    /// Returns `bytes` charged earlier.
    pub fn release(&mut self, bytes: usize) {
        assert!(
            bytes <= self.used_bytes,
            "released more memory than charged"
        );
        self.used_bytes -= bytes;
    }
}
