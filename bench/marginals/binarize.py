#!/usr/bin/env python3
"""Binary views of Adult and census_income_kdd for the CALM vs Fourier comparison on natively
binary attributes (bench/marginals, docs/ANALYTICS-MARGINALS.md).

    python3 bench/marginals/binarize.py adult16  < data/adult.csv               > adult16.csv
    xz -dc data/census_income_kdd.csv.xz | python3 bench/marginals/binarize.py census32 > census32.csv
    python3 bench/marginals/binarize.py adult16 --schema > adult16.toml
    python3 bench/marginals/binarize.py adultbits < data/adult.csv > adultbits.csv   # bit-encoded

Each output column is one yes/no predicate on one input column, coded "no"/"yes" (a
categorical attribute with two categories). Thresholds are round public numbers (no data-
dependent choice); a missing value ("" or "?") is "no". `--schema` prints the matching
schema instead of the data. The first d columns of a view are usable as a d-attribute subset
(`--attributes`), in the order listed below.
"""
import csv
import sys


def num(v):
    try:
        return float(v)
    except ValueError:
        return None


def ge(col, t):
    return (col, lambda v: (num(v) is not None and num(v) >= t))


def gt(col, t):
    return (col, lambda v: (num(v) is not None and num(v) > t))


def eq(col, *vals):
    return (col, lambda v: v.strip() in vals)


def ne(col, *vals):
    return (col, lambda v: v.strip() not in vals and v.strip() not in ("", "?"))


VIEWS = {
    # Adult: 6 numeric thresholds + 10 categorical predicates.
    "adult16": [
        ("age_40plus", ge("age", 40)),
        ("fnlwgt_180k_plus", ge("fnlwgt", 180000)),
        ("education_num_10plus", ge("education_num", 10)),
        ("capital_gain_pos", gt("capital_gain", 0)),
        ("capital_loss_pos", gt("capital_loss", 0)),
        ("hours_over_40", gt("hours_per_week", 40)),
        ("male", eq("sex", "Male")),
        ("income_over_50k", eq("income", ">50K", ">50K.")),
        ("private", eq("workclass", "Private")),
        ("married_civ", eq("marital_status", "Married-civ-spouse")),
        ("exec_or_prof", eq("occupation", "Exec-managerial", "Prof-specialty")),
        ("own_child", eq("relationship", "Own-child")),
        ("white", eq("race", "White")),
        ("us_born", eq("native_country", "United-States")),
        ("degree", eq("education", "Bachelors", "Masters", "Doctorate", "Prof-school")),
        ("self_employed", eq("workclass", "Self-emp-inc", "Self-emp-not-inc")),
    ],
    # census_income_kdd: 9 numeric thresholds + 23 categorical predicates.
    "census32": [
        ("age_40plus", ge("age", 40)),
        ("wage_pos", gt("wage_per_hour", 0)),
        ("capital_gains_pos", gt("capital_gains", 0)),
        ("capital_losses_pos", gt("capital_losses", 0)),
        ("dividends_pos", gt("dividends_from_stocks", 0)),
        ("worked_for_employer", gt("num_persons_worked_for_employer", 0)),
        ("own_business", gt("own_business_or_self_employed", 0)),
        ("veterans_benefits_2", eq("veterans_benefits", "2")),
        ("weeks_52", ge("weeks_worked_in_year", 52)),
        ("male", eq("sex", "Male")),
        ("income_50k_plus", eq("income", "50000+")),
        ("private", eq("class_of_worker", "Private")),
        ("worker_niu", eq("class_of_worker", "Not in universe")),
        ("hs_graduate", eq("education", "High school graduate")),
        ("enrolled", ne("enroll_in_edu_inst_last_wk", "Not in universe")),
        ("married_civ", eq("marital_stat", "Married-civilian spouse present")),
        ("never_married", eq("marital_stat", "Never married")),
        ("industry_niu", eq("major_industry_code", "Not in universe or children")),
        ("white", eq("race", "White")),
        ("hispanic_all_other", eq("hispanic_origin", "All other")),
        ("union_member", eq("member_of_a_labor_union", "Yes")),
        ("full_time", eq("full_or_part_time_employment_stat", "Full-time schedules")),
        ("nonfiler", eq("tax_filer_stat", "Nonfiler")),
        ("joint_under_65", eq("tax_filer_stat", "Joint both under 65")),
        ("householder", eq("detailed_household_summary_in_household", "Householder")),
        ("msa_nonmover", eq("migration_code_change_in_msa", "Nonmover")),
        ("same_house", eq("live_in_this_house_1_year_ago", "Yes")),
        ("family_niu", eq("family_members_under_18", "Not in universe")),
        ("us_born", eq("country_of_birth_self", "United-States")),
        ("native_citizen", eq("citizenship", "Native- Born in the United States")),
        ("veteran_form_niu", eq("fill_inc_questionnaire_for_veterans_admin", "Not in universe")),
        ("year_95", eq("year", "95")),
    ],
}


# Bit encodings: each categorical attribute with c labels (in the schema's order) becomes
# ceil(log2 c) binary attributes, bit b of the label's index (b = 0 the least significant):
# the "binary-encoded attributes" on which the Fourier method of Cormode et al. works.
BITS_ORDER = {
    "adultbits": ("examples/adult.toml",
                  ["sex", "income", "race", "relationship", "marital_status", "workclass", "education",
                   "occupation", "native_country"]),
}


def bit_view(name):
    import math
    import tomllib
    schema_path, order = BITS_ORDER[name]
    with open(schema_path, "rb") as f:
        attrs = {a["name"]: a for a in tomllib.load(f)["attributes"]}
    view = []
    for col in order:
        labels = [str(c) for c in attrs[col]["categories"]]
        width = max(1, math.ceil(math.log2(len(labels))))
        index = {lab: i for i, lab in enumerate(labels)}
        for b in range(width):
            def pred(v, index=index, b=b, col=col):
                v = v.strip() or "?"
                if v not in index:
                    sys.exit(f"binarize.py: column {col}: value {v!r} is not a category of the schema")
                return (index[v] >> b) & 1 == 1
            view.append((f"{col}_b{b}", (col, pred)))
    return view


def main():
    if len(sys.argv) >= 2 and sys.argv[1] in BITS_ORDER:
        VIEWS[sys.argv[1]] = bit_view(sys.argv[1])
    if len(sys.argv) < 2 or sys.argv[1] not in VIEWS:
        sys.exit(f"usage: binarize.py {{{'|'.join(VIEWS)}}} [--schema] < data.csv > view.csv")
    view = VIEWS[sys.argv[1]]
    if "--schema" in sys.argv[2:]:
        print(f"# bench/marginals/binarize.py {sys.argv[1]} --schema: {len(view)} yes/no attributes.")
        print('invalid = "error"')
        for name, (col, _) in view:
            print(f'\n[[attributes]]\nname = "{name}"  # from {col}\nkind = "categorical"\ncategories = ["no", "yes"]')
        return
    reader = csv.DictReader(sys.stdin)
    out = csv.writer(sys.stdout, lineterminator="\n")
    out.writerow([name for name, _ in view])
    for row in reader:
        out.writerow(["yes" if pred(row[col]) else "no" for _, (col, pred) in view])


if __name__ == "__main__":
    main()
