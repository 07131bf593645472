//! Inference on the bundled real data: every numeric column of Census-Income (KDD) and of
//! Adult — Adult also with 10% and 40% of its cells blanked at random (seeded) with a mix of
//! missing tokens — is inferred numeric; the categorical ones categorical. Both lists are
//! written out in full.

use harmony_core::sampling::{fast_rng, uniform_below, uniform01};
use harmony_core::schema::{Attribute, Missing};
use harmony_data::{DataReader, InferOptions, InvalidPolicy, infer_batches, infer_path};
use std::collections::BTreeSet;
use std::path::PathBuf;

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../data").join(name)
}

/// (numeric, categorical) attribute names of an inferred schema.
fn kinds(file: &harmony_data::SchemaFile) -> (BTreeSet<String>, BTreeSet<String>) {
    let (num, cat): (Vec<_>, Vec<_>) = file.attributes.iter().partition(|a| a.is_numeric());
    (num.iter().map(|a| a.name().to_string()).collect(), cat.iter().map(|a| a.name().to_string()).collect())
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

const ADULT_NUMERIC: [&str; 6] = ["age", "fnlwgt", "education_num", "capital_gain", "capital_loss", "hours_per_week"];
const ADULT_CATEGORICAL: [&str; 10] = [
    "workclass",
    "education",
    "marital_status",
    "occupation",
    "relationship",
    "race",
    "sex",
    "native_country",
    "income",
    "split",
];

/// Adult's CSV with each cell replaced, with probability `p`, by a missing token drawn among
/// the defaults (empty, NA, N/A, NaN, null, None, ?).
fn blanked_adult(p: f64, seed: u64) -> Vec<u8> {
    const TOKENS: [&str; 7] = ["", "NA", "N/A", "NaN", "null", "None", "?"];
    let mut rng = fast_rng(seed);
    let mut rdr = csv::Reader::from_path(data("adult.csv")).unwrap();
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(rdr.headers().unwrap()).unwrap();
    for rec in rdr.records() {
        let rec = rec.unwrap();
        let row: Vec<&str> = rec
            .iter()
            .map(|v| if uniform01(&mut rng) < p { TOKENS[uniform_below(&mut rng, 7) as usize] } else { v })
            .collect();
        w.write_record(&row).unwrap();
    }
    w.into_inner().unwrap()
}

#[test]
fn adult_numeric_columns_are_numeric_with_and_without_blanks() {
    let inf = infer_path(&data("adult.csv"), &InferOptions::default()).unwrap();
    assert_eq!(kinds(&inf.file), (set(&ADULT_NUMERIC), set(&ADULT_CATEGORICAL)), "{:#?}", inf.notes);
    assert_eq!(inf.file.invalid, InvalidPolicy::Error, "no numeric cell is missing in Adult");
    for (p, seed) in [(0.10, 18), (0.40, 19)] {
        let mut reader = DataReader::from_bytes("adult-blanked.csv", blanked_adult(p, seed)).unwrap();
        let inf = infer_batches(&mut reader, &InferOptions::default()).unwrap();
        assert_eq!(kinds(&inf.file), (set(&ADULT_NUMERIC), set(&ADULT_CATEGORICAL)), "p = {p}: {:#?}", inf.notes);
        // Every column has missing cells: each reports them (no row is skipped), said in a note.
        assert_eq!(inf.file.invalid, InvalidPolicy::Error);
        for a in &inf.file.attributes {
            assert_eq!(a.missing, Missing::Report, "{}", a.name());
            if let Attribute::Categorical { categories, .. } = &a.attribute {
                assert!(!categories.contains(&"?".to_string()), "{}: \"?\" is a missing token", a.name());
            }
        }
        assert!(
            inf.notes.iter().any(|w| w.contains("\"age\"") && w.contains("missing = \"report\"")),
            "{:#?}",
            inf.notes
        );
        // The schema builds, with a presence attribute per numeric column.
        let schema = inf.file.schema().unwrap();
        assert_eq!(schema.len(), 16 + 6);
        assert_eq!(schema.position("age:missing"), Some(schema.position("age").unwrap() + 1));
    }
}

#[test]
fn census_numeric_columns_are_numeric() {
    // The UCI documentation's continuous attributes, plus integer codes that the inference
    // reads as numbers: detailed recodes (52 and 47 distinct values: "many"), and codes without
    // gaps (own_business 0–2, veterans_benefits 0–2, year 94–95), each with a warning.
    let continuous = [
        "age",
        "wage_per_hour",
        "capital_gains",
        "capital_losses",
        "dividends_from_stocks",
        "instance_weight",
        "num_persons_worked_for_employer",
        "weeks_worked_in_year",
    ];
    let integer_codes = [
        "detailed_industry_recode",
        "detailed_occupation_recode",
        "own_business_or_self_employed",
        "veterans_benefits",
        "year",
    ];
    let categorical = [
        "class_of_worker",
        "education",
        "enroll_in_edu_inst_last_wk",
        "marital_stat",
        "major_industry_code",
        "major_occupation_code",
        "race",
        "hispanic_origin",
        "sex",
        "member_of_a_labor_union",
        "reason_for_unemployment",
        "full_or_part_time_employment_stat",
        "tax_filer_stat",
        "region_of_previous_residence",
        "state_of_previous_residence",
        "detailed_household_and_family_stat",
        "detailed_household_summary_in_household",
        "migration_code_change_in_msa",
        "migration_code_change_in_reg",
        "migration_code_move_within_reg",
        "live_in_this_house_1_year_ago",
        "migration_prev_res_in_sunbelt",
        "family_members_under_18",
        "country_of_birth_father",
        "country_of_birth_mother",
        "country_of_birth_self",
        "citizenship",
        "fill_inc_questionnaire_for_veterans_admin",
        "income",
        "split",
    ];
    let inf = infer_path(&data("census_income_kdd.csv.xz"), &InferOptions::default()).unwrap();
    assert_eq!(inf.rows, 299_285);
    let (num, cat) = kinds(&inf.file);
    let mut want_num = set(&continuous);
    want_num.extend(set(&integer_codes));
    assert_eq!(num, want_num, "{:#?}", inf.notes);
    assert_eq!(cat, set(&categorical), "{:#?}", inf.notes);
    for code in ["own_business_or_self_employed", "veterans_benefits", "year"] {
        assert!(
            inf.warnings.iter().any(|w| w.contains(code) && w.contains("without gaps")),
            "{code}: {:#?}",
            inf.warnings
        );
    }
}

/// The fuzz tier's schema_csv findings (docs/FUZZ.md): a column of 1e308, 0 and -0e308 read as
/// integer codes gave the labels "0" twice, and numbers too wide for a numeric range made an
/// inferred schema that does not load. Every inferred schema loads.
#[test]
fn inferred_schemas_of_extreme_numbers_load() {
    for csv in ["x\n1e308\n0\n-0e308\n", "x,y\n1e308,a\n-1e308,b\n0,a\n", "x\n0\n-0\n7\n", "x\n-0\n0\n"] {
        let mut r = DataReader::from_bytes("data.csv", csv.as_bytes().to_vec()).unwrap();
        match infer_batches(&mut r, &InferOptions::default()) {
            Ok(inf) => assert!(inf.file.schema().is_ok(), "{csv:?}: {:?}", inf.file.validate()),
            Err(e) => {
                assert!(["too wide a range", "constant (0)"].iter().any(|m| e.to_string().contains(m)), "{csv:?}: {e}")
            }
        }
    }
}
