//! The OpenAPI 3.1 document, generated from the handlers' `#[utoipa::path]` annotations and the
//! protocol types (harmony-protocol's `openapi` feature): it cannot drift from the router, which
//! registers each handler together with its annotation ([`crate::api_router`]).
//!
//! Served at `GET /openapi.json` and committed as `docs/openapi.json`; the test
//! `tests/openapi.rs` fails when the committed file is stale (`HARMONY_UPDATE_OPENAPI=1 cargo
//! test -p harmony-server --test openapi` rewrites it).

use std::sync::LazyLock;
use utoipa::Modify;
use utoipa::OpenApi;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};

/// The document's fixed parts: title, description, the analyst security scheme.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "Harmony collection server",
        version = "1",
        description = "Local differential privacy collection: devices randomize on the device and submit \
                       reports; analysts read estimates with standard errors. See docs/SERVER.md. Every \
                       error is `{\"error\": {\"field\", \"message\"}}`."
    ),
    modifiers(&Security),
    components(schemas(harmony_protocol::ErrorBody, harmony_protocol::CreateCollection))
)]
pub struct ApiDoc;

struct Security;

impl Modify for Security {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        let scheme = HttpBuilder::new()
            .scheme(HttpAuthScheme::Bearer)
            .description(Some(
                "The admin token given to `harmony serve` (--admin-token or HARMONY_ADMIN_TOKEN), a \
                 per-collection analyst token (`hct_…`, POST /v1/collections/{id}/tokens) or, for \
                 /metrics, the metrics token (--metrics-token).",
            ))
            .build();
        components.add_security_scheme("analyst", SecurityScheme::Http(scheme));
    }
}

/// The whole document: [`ApiDoc`] plus every route of [`crate::api_router`].
pub fn document() -> utoipa::openapi::OpenApi {
    crate::api_router().into_openapi()
}

static JSON: LazyLock<String> =
    LazyLock::new(|| document().to_pretty_json().expect("the OpenAPI document serializes") + "\n");

/// The document as pretty JSON (computed once).
pub fn json() -> &'static str {
    &JSON
}
