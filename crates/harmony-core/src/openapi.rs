//! OpenAPI schemas (utoipa) of the types that appear in Harmony's wire documents: a schema and
//! its attributes, mechanism names, `k` choices. Only with the `openapi` feature (the server's
//! `/openapi.json`); devices never build it.

use crate::kinds::{NumericKind, OracleKind, RecordNumeric};
use crate::schema::{Attribute, Schema};
use crate::strategy::KChoice;
use std::borrow::Cow;
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{AdditionalProperties, ArrayBuilder, ObjectBuilder, OneOfBuilder, Schema as S, Type};
use utoipa::{PartialSchema, ToSchema};

type Schemas = Vec<(String, RefOr<S>)>;

fn string_enum(names: &[&str], description: &str) -> RefOr<S> {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(names.iter().copied()))
        .description(Some(description))
        .into()
}

macro_rules! named_schema {
    ($ty:ident, $what:literal) => {
        impl PartialSchema for $ty {
            fn schema() -> RefOr<S> {
                string_enum($ty::NAMES, $what)
            }
        }
        impl ToSchema for $ty {
            fn name() -> Cow<'static, str> {
                Cow::Borrowed(stringify!($ty))
            }
        }
    };
}

named_schema!(NumericKind, "A 1-D numeric mechanism.");
named_schema!(OracleKind, "A frequency oracle.");
named_schema!(RecordNumeric, "The numeric mechanism of a record strategy.");

impl PartialSchema for KChoice {
    fn schema() -> RefOr<S> {
        let names = string_enum(&["optimal", "paper"], "The closed-form optimum or the paper's rule.");
        let fixed = ObjectBuilder::new().schema_type(Type::Integer).minimum(Some(1)).description(Some("A fixed k."));
        OneOfBuilder::new()
            .item(names)
            .item(fixed)
            .description(Some("How sample-k picks k: \"optimal\", \"paper\" or a number of attributes."))
            .into()
    }
}

impl ToSchema for KChoice {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("KChoice")
    }
}

fn string_prop(description: &str) -> ObjectBuilder {
    ObjectBuilder::new().schema_type(Type::String).description(Some(description))
}

fn kind_prop(kind: &str) -> ObjectBuilder {
    ObjectBuilder::new().schema_type(Type::String).enum_values(Some([kind]))
}

/// The `missing` property of an attribute: `"error"`, `"report"` or `{"impute": value}`.
fn missing_prop() -> OneOfBuilder {
    let names = ObjectBuilder::new().schema_type(Type::String).enum_values(Some(["error", "report"]));
    let impute = ObjectBuilder::new()
        .property("impute", ObjectBuilder::new().description(Some("A number in [min, max], or one of the labels.")))
        .required("impute")
        .additional_properties(Some(AdditionalProperties::FreeForm(false)));
    OneOfBuilder::new().item(names).item(impute).description(Some(
        "What a device does with a missing value: \"error\" (default: the record is refused), \"report\" (missingness reported privately: a category \"(missing)\" added last, or for a numeric attribute a presence attribute \"<name>:missing\" after it) or {\"impute\": v}.",
    ))
}

impl PartialSchema for Attribute {
    fn schema() -> RefOr<S> {
        let number = |d: &str| ObjectBuilder::new().schema_type(Type::Number).description(Some(d.to_string()));
        let numeric = ObjectBuilder::new()
            .title(Some("Numeric"))
            .description(Some("A number in [min, max] (public bounds, min < max)."))
            .property("kind", kind_prop("numeric"))
            .property("name", string_prop("Column name."))
            .property("min", number("Lower bound."))
            .property("max", number("Upper bound."))
            .property("missing", missing_prop())
            .required("kind")
            .required("name")
            .required("min")
            .required("max")
            .additional_properties(Some(AdditionalProperties::FreeForm(false)));
        let labels = ArrayBuilder::new().items(string_prop("A label.")).min_items(Some(2));
        let categorical = ObjectBuilder::new()
            .title(Some("Categorical"))
            .description(Some("One of an ordered list of labels (at least 2, distinct)."))
            .property("kind", kind_prop("categorical"))
            .property("name", string_prop("Column name."))
            .property("categories", labels.description(Some("The labels, in order; a value's index is its category.")))
            .property("missing", missing_prop())
            .required("kind")
            .required("name")
            .required("categories")
            .additional_properties(Some(AdditionalProperties::FreeForm(false)));
        OneOfBuilder::new()
            .item(numeric)
            .item(categorical)
            .description(Some("One attribute of a schema (\"kind\" names it)."))
            .into()
    }
}

impl ToSchema for Attribute {}

impl PartialSchema for Schema {
    fn schema() -> RefOr<S> {
        ArrayBuilder::new()
            .items(Attribute::schema_ref())
            .min_items(Some(1))
            .description(Some("The ordered attributes of a record (names distinct)."))
            .into()
    }
}

impl ToSchema for Schema {
    fn schemas(schemas: &mut Schemas) {
        schemas.push((<Attribute as ToSchema>::name().into(), Attribute::schema()));
    }
}

/// `$ref` to a named component.
trait SchemaRef: ToSchema {
    fn schema_ref() -> RefOr<S> {
        RefOr::Ref(utoipa::openapi::Ref::from_schema_name(<Self as ToSchema>::name()))
    }
}

impl<T: ToSchema> SchemaRef for T {}
