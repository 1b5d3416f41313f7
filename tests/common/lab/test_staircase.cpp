// Staircases: flags read as settings, the rule that each rung adds or changes exactly one setting of the rung
// below (tested on synthetic staircases: a staircase defined in the repository is added to
// EveryStaircaseOfTheRepositoryHasOneChangePerRung when it exists), and the runner's comparisons.
#include <gtest/gtest.h>

#include <vector>

#include "common/lab/staircase.h"
#include "tests/common/expect_error.h"

namespace lab::staircase {
namespace {

bool mentions(const std::vector<std::string>& problems, const std::string& part) {
  for (const std::string& p : problems)
    if (p.find(part) != std::string::npos) return true;
  return false;
}

TEST(StaircaseSettings, FlagsInEveryFormBecomeSettings) {
  const Settings s =
      parse_settings({"--batch", "8", "--shuffle", "--no-bias", "--lr=3e-4", "--offset", "-1", "--batch", "16"});
  EXPECT_EQ(s, (Settings{{"batch", "16"}, {"shuffle", "true"}, {"bias", "false"}, {"lr", "3e-4"}, {"offset", "-1"}}));
  testing::expect_error(
      [] {
        parse_settings({"--batch", "8", "16"});
      },
      ErrorKind::InvalidArgument, {"expected a flag", "'16'", "after '8'"});
  testing::expect_error([] { parse_settings({"--"}); }, ErrorKind::InvalidArgument, {"'--'"});
}

TEST(StaircaseSettings, ChangesAreDescribedAsFlags) {
  EXPECT_EQ(describe_change({{"dtype", "fp32"}}, {{"dtype", "tf32"}}), "--dtype fp32 -> tf32");
  EXPECT_EQ(describe_change({}, {{"fused", "true"}}), "+ --fused true");
  EXPECT_EQ(describe_change({{"a", "1"}, {"b", "2"}}, {{"a", "3"}}), "--a 1 -> 3; - --b 2");
  EXPECT_EQ(describe_change({{"a", "1"}}, {{"a", "1"}}), "no change");
}

Staircase good_staircase() {
  return {"speed",
          "synthetic",
          {"--model", "tiny", "--dtype", "fp32"},
          {{"base", "the baseline", {}},
           {"tf32", "TF32 GEMMs", {"--dtype", "tf32"}},
           {"fused", "fused classifier", {"--dtype", "tf32", "--fused-classifier"}},
           {"bigger", "a larger batch", {"--dtype", "tf32", "--fused-classifier", "--batch", "32"}}}};
}

TEST(StaircaseRule, AWellFormedStaircaseHasNoProblems) {
  EXPECT_EQ(check_one_change_per_rung(good_staircase()), std::vector<std::string>{});
  EXPECT_EQ(good_staircase().flags_for(good_staircase().rungs[1]),
            (std::vector<std::string>{"--model", "tiny", "--dtype", "fp32", "--dtype", "tf32"}));
}

TEST(StaircaseRule, EachBrokenRuleIsNamed) {
  Staircase two = good_staircase();
  two.rungs[1].flags = {"--dtype", "tf32", "--batch", "32"};  // two changes at once
  const std::vector<std::string> p2 = check_one_change_per_rung(two);
  ASSERT_EQ(p2.size(), 2u);  // rung 2 changes two settings, and rung 3 drops the --batch that rung 2 added
  EXPECT_TRUE(mentions(p2, "rung 2 (tf32) must add or change exactly one setting")) << p2[0];
  EXPECT_TRUE(mentions(p2, "it changes: + --batch 32; --dtype fp32 -> tf32"));
  EXPECT_TRUE(mentions(p2, "rung 3 (fused) must add or change exactly one setting"));

  Staircase dropped = good_staircase();
  dropped.rungs[2].flags = {"--fused-classifier"};  // forgets the tf32 of the rung below
  EXPECT_TRUE(mentions(check_one_change_per_rung(dropped), "--dtype tf32 -> fp32"));

  Staircase removed = good_staircase();
  removed.rungs[3].flags = {"--dtype", "tf32", "--batch", "32"};  // drops --fused-classifier, adds --batch
  EXPECT_TRUE(mentions(check_one_change_per_rung(removed), "- --fused-classifier true"));

  Staircase same = good_staircase();
  same.rungs[1].flags = {"--dtype", "fp32"};  // what the base already says
  EXPECT_TRUE(mentions(check_one_change_per_rung(same), "it changes: no change"));

  Staircase names = good_staircase();
  names.rungs[2].name = "tf32";
  names.rungs[3].name = "";
  EXPECT_TRUE(mentions(check_one_change_per_rung(names), "rung 3 (tf32): the name is taken"));
  EXPECT_TRUE(mentions(check_one_change_per_rung(names), "rung 4 () has no name"));

  Staircase twice = good_staircase();
  twice.rungs[1].flags = {"--dtype", "tf32", "--dtype", "bf16"};
  EXPECT_TRUE(mentions(check_one_change_per_rung(twice), "rung 2 (tf32) sets --dtype twice"));

  Staircase unparsable = good_staircase();
  unparsable.rungs[1].flags = {"dtype", "tf32"};
  EXPECT_TRUE(mentions(check_one_change_per_rung(unparsable), "rung 2 (tf32): expected a flag"));
}

TEST(StaircaseRule, EveryStaircaseOfTheRepositoryHasOneChangePerRung) {
  // No chapter defines a staircase yet whose flags all exist; each one that does is listed here.
  const std::vector<Staircase> defined = {};
  for (const Staircase& s : defined) EXPECT_EQ(check_one_change_per_rung(s), std::vector<std::string>{}) << s.name;
}

std::vector<Measurement> step_ms(std::vector<double> samples) {
  return {{"step_ms", "ms", bench::Better::Lower, samples}};
}

TEST(StaircaseRunner, EachRungIsComparedWithTheLastRungThatRanAndTheFirst) {
  const Staircase s = good_staircase();
  std::vector<std::string> order;
  const StaircaseReport report = run_staircase(
      s,
      [](const Rung& rung) -> std::vector<Measurement> {
        if (rung.name == "base") return step_ms({10.0, 10.1, 9.9});
        if (rung.name == "tf32") throw Error(ErrorKind::Unsupported, "--dtype tf32 needs a GPU");
        if (rung.name == "fused") return step_ms({5.0, 5.1, 4.9});
        return step_ms({4.9, 5.6, 4.4});
      },
      [&](const RungReport& r) { order.push_back(r.rung.name); });
  EXPECT_EQ(order, (std::vector<std::string>{"base", "tf32", "fused", "bigger"}));
  ASSERT_EQ(report.rungs.size(), 4u);
  EXPECT_EQ(report.rungs[0].change, "(base)");
  EXPECT_EQ(report.rungs[1].change, "--dtype fp32 -> tf32");
  EXPECT_FALSE(report.rungs[1].ran);
  EXPECT_EQ(report.rungs[1].error, "--dtype tf32 needs a GPU");

  const MetricReport& fused = report.rungs[2].metrics.at(0);
  EXPECT_EQ(fused.previous, 0);  // tf32 did not run
  EXPECT_DOUBLE_EQ(fused.vs_previous->ratio, 0.5);
  EXPECT_EQ(fused.vs_previous->verdict, bench::Verdict::Gain);
  const MetricReport& bigger = report.rungs[3].metrics.at(0);
  EXPECT_EQ(bigger.previous, 2);
  EXPECT_DOUBLE_EQ(bigger.vs_previous->ratio, 4.9 / 5.0);
  EXPECT_EQ(bigger.vs_previous->verdict, bench::Verdict::WithinSpread);  // 0.1 apart, spread 1.2
  EXPECT_DOUBLE_EQ(bigger.vs_first->ratio, 4.9 / 10.0);
  EXPECT_EQ(bigger.vs_first->verdict, bench::Verdict::Gain);
  EXPECT_FALSE(report.rungs[0].metrics.at(0).vs_previous.has_value());

  const std::string table = report.table();
  EXPECT_NE(table.find("not run: --dtype tf32 needs a GPU"), std::string::npos) << table;
  EXPECT_NE(table.find("x0.5 (gain) vs base"), std::string::npos) << table;
  EXPECT_NE(table.find("x0.98 (within spread) vs fused"), std::string::npos) << table;

  bench::BenchResult result = bench::BenchResult::start("staircase_speed", 0, nullptr);
  report.add_to(result);
  const bench::BenchResult back = bench::BenchResult::from_json(result.to_json());
  ASSERT_EQ(back.rows.size(), 4u);
  EXPECT_EQ(back.rows[0].as_object().front().first, "rung");
  EXPECT_EQ(back.rows[1].at("status").as_string(), "not run");
  EXPECT_EQ(back.rows[2].at("flags").as_string(), "--dtype tf32 --fused-classifier");
  EXPECT_DOUBLE_EQ(back.rows[2].at("step_ms_vs_previous").as_number(), 0.5);
  EXPECT_EQ(back.rows[2].at("step_ms_verdict_vs_previous").as_string(), "gain");
  EXPECT_TRUE(back.rows[0].at("step_ms_vs_first").is_null());
  ASSERT_NE(back.find_metric("fused.step_ms"), nullptr);
  EXPECT_DOUBLE_EQ(back.find_metric("fused.step_ms")->summary.median, 5.0);
  EXPECT_EQ(back.find_column("step_ms_median")->better, bench::Better::Lower);
}

TEST(StaircaseRunner, ABrokenStaircaseIsRefusedBeforeAnyRungRuns) {
  Staircase s = good_staircase();
  s.rungs[1].flags = {"--dtype", "tf32", "--batch", "32"};
  int runs = 0;
  testing::expect_error(
      [&] {
        run_staircase(s, [&](const Rung&) {
          ++runs;
          return step_ms({1.0});
        });
      },
      ErrorKind::InvalidArgument, {"not one change per rung", "rung 2 (tf32)"});
  EXPECT_EQ(runs, 0);
}

}  // namespace
}  // namespace lab::staircase
