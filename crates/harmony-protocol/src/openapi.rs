//! Hand-written OpenAPI schemas where the derive would be wrong: [`TaskSpec`] is internally
//! tagged (`"kind"`) and each variant refuses unknown fields, so each branch is the variant's
//! object with `kind` added (a `$ref` to the variant plus `kind` in an `allOf` would forbid
//! `kind` through the variant's `additionalProperties: false`).

use crate::spec::*;
use std::borrow::Cow;
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{ObjectBuilder, OneOfBuilder, Schema, Type};
use utoipa::{PartialSchema, ToSchema};

/// `schema` (an inline object) with a required `tag` property equal to `name`.
fn tagged(tag: &str, name: &str, schema: RefOr<Schema>) -> RefOr<Schema> {
    let RefOr::T(Schema::Object(mut obj)) = schema else { panic!("{name}: an inline object schema") };
    let kind = ObjectBuilder::new().schema_type(Type::String).enum_values(Some([name])).build();
    obj.properties.insert(tag.to_string(), RefOr::T(Schema::Object(kind)));
    obj.required.insert(0, tag.to_string());
    obj.title = Some(name.to_string());
    RefOr::T(Schema::Object(obj))
}

fn variants() -> Vec<RefOr<Schema>> {
    vec![
        tagged("kind", "means", MeansSpec::schema()),
        tagged("kind", "frequency", FrequencySpec::schema()),
        tagged("kind", "range", RangeSpec::schema()),
        tagged("kind", "range2d", Range2dSpec::schema()),
        tagged("kind", "heavy-hitters", HeavyHittersSpec::schema()),
        tagged("kind", "marginals", MarginalsSpec::schema()),
        tagged("kind", "linear-queries", LinearQueriesSpec::schema()),
        tagged("kind", "train", TrainSpec::schema()),
    ]
}

impl PartialSchema for TaskSpec {
    fn schema() -> RefOr<Schema> {
        let mut one = OneOfBuilder::new().description(Some("One task with its options (`\"kind\"` names it)."));
        for v in variants() {
            one = one.item(v);
        }
        one.into()
    }
}

impl ToSchema for TaskSpec {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("TaskSpec")
    }
    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        // The variants' field types (enums, KChoice, mechanism names) are referenced by name.
        <MeansSpec as ToSchema>::schemas(schemas);
        <FrequencySpec as ToSchema>::schemas(schemas);
        <RangeSpec as ToSchema>::schemas(schemas);
        <Range2dSpec as ToSchema>::schemas(schemas);
        <HeavyHittersSpec as ToSchema>::schemas(schemas);
        <MarginalsSpec as ToSchema>::schemas(schemas);
        <LinearQueriesSpec as ToSchema>::schemas(schemas);
        <TrainSpec as ToSchema>::schemas(schemas);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_task_kind_is_a_branch() {
        assert_eq!(variants().len(), TaskKind::ALL.len());
        let text = serde_json::to_string(&TaskSpec::schema()).unwrap();
        for k in TaskKind::ALL {
            assert!(text.contains(&format!("\"enum\":[\"{}\"]", k.name())), "{k}: {text}");
        }
    }
}
