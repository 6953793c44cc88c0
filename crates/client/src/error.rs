//! Errors of the client API: the registry's [`ShoalError`] with its
//! [`ErrorCode`] and [`ErrorClass`] (temporary → retry the transaction,
//! permanent → fix the request, unknown result → read back to find out).

pub use shoal_types::{ErrorClass, ErrorCode, ShoalError};

/// Turns an error code received from a data node into a [`ShoalError`].
/// A code missing from this client's registry (a newer node) becomes
/// `Internal`, with the number kept in the detail so nothing is lost.
pub(crate) fn from_wire(code: u16, detail: &str) -> ShoalError {
    match ErrorCode::from_u16(code) {
        Some(c) => ShoalError::with_detail(c, detail),
        None => ShoalError::with_detail(
            ErrorCode::Internal,
            format!("data node sent error code {code}, unknown to this client: {detail}"),
        ),
    }
}

pub(crate) fn bad_request(detail: impl Into<String>) -> ShoalError {
    ShoalError::with_detail(ErrorCode::BadRequest, detail)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_codes_map_to_the_registry() {
        assert_eq!(from_wire(626, "x").code, ErrorCode::TupleNotFound);
        let e = from_wire(9999, "later");
        assert_eq!(e.code, ErrorCode::Internal);
        assert!(e.detail.contains("9999") && e.detail.contains("later"));
    }
}
