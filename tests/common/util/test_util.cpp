// JSON, flags and the random generator.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "common/util/flags.h"
#include "common/util/json.h"
#include "common/util/rng.h"
#include "tests/common/expect_error.h"

namespace lab {
namespace {

using testing::expect_error;

TEST(Json, RoundTripsAndKeepsOrder) {
  const std::string text =
      R"({"b": 1, "a": [true, false, null, -2.5e-3, "x\"\\\n\u00e9\ud83d\ude00"], "c": {"n": 12345678901}})";
  const Json j = Json::parse(text);
  EXPECT_EQ(j.as_object()[0].first, "b");
  EXPECT_EQ(j.at("c").at("n").as_int(), 12345678901);
  EXPECT_EQ(j.at("a").as_array()[4].as_string(), "x\"\\\n\xc3\xa9\xf0\x9f\x98\x80");
  EXPECT_EQ(Json::parse(j.dump()).dump(), j.dump());
  EXPECT_EQ(Json::parse(j.dump(2)).dump(), j.dump());
  EXPECT_EQ(Json(0.1).dump(), "0.1");
  EXPECT_EQ(Json(3).dump(), "3");
  EXPECT_EQ(Json(NAN).dump(), "null");
}

TEST(Json, ErrorsNameTheProblemAndPlace) {
  expect_error([] { Json::parse("{\"a\": 1,\n \"b\": }"); }, ErrorKind::Format, {"line 2"});
  expect_error([] { Json::parse("[1, 2"); }, ErrorKind::Format, {"expected"});
  expect_error([] { Json::parse("\"abc"); }, ErrorKind::Format, {"unterminated"});
  expect_error([] { Json::parse("01x"); }, ErrorKind::Format, {});
  expect_error([] { Json::parse(std::string(300, '[')); }, ErrorKind::Format, {"deep"});
  expect_error([] { Json::parse("{}").at("missing"); }, ErrorKind::Format, {"missing"});
  expect_error([] { Json::parse("1.5").as_int(); }, ErrorKind::Format, {"integer"});
  expect_error([] { Json::parse("\"\\ud800\""); }, ErrorKind::Format, {"surrogate"});
}

TEST(Flags, ParsesTypesAndRejectsBadInput) {
  std::string s = "x";
  int64_t i = 3;
  double f = 0.5;
  bool b = false, on = true;
  std::string choice = "a";
  Flags flags("prog", "test");
  flags.add_string("name", &s, "a string");
  flags.add_int("count", &i, "an int", 1, 10);
  flags.add_float("rate", &f, "a float", 0.0, 1.0);
  flags.add_bool("verbose", &b, "a bool");
  flags.add_bool("color", &on, "another bool");
  flags.add_choice("mode", &choice, {"a", "b"}, "a choice");
  EXPECT_TRUE(flags.parse({"--name", "y", "--count=7", "--rate", "0.25", "--verbose", "--no-color", "--mode", "b"}));
  EXPECT_EQ(s, "y");
  EXPECT_EQ(i, 7);
  EXPECT_EQ(f, 0.25);
  EXPECT_TRUE(b);
  EXPECT_FALSE(on);
  EXPECT_EQ(choice, "b");
  EXPECT_TRUE(flags.was_set("count"));
  expect_error([&] { flags.parse({"--nope"}); }, ErrorKind::InvalidArgument, {"unknown flag --nope"});
  expect_error([&] { flags.parse({"--count", "11"}); }, ErrorKind::InvalidArgument, {"--count", "out of range"});
  expect_error([&] { flags.parse({"--count", "3x"}); }, ErrorKind::InvalidArgument, {"expected an integer"});
  expect_error([&] { flags.parse({"--rate", "nan"}); }, ErrorKind::InvalidArgument, {"--rate"});
  expect_error([&] { flags.parse({"--count"}); }, ErrorKind::InvalidArgument, {"needs a value"});
  expect_error([&] { flags.parse({"--mode", "c"}); }, ErrorKind::InvalidArgument, {"not one of a|b"});
  expect_error([&] { flags.parse({"stray"}); }, ErrorKind::InvalidArgument, {"unexpected argument"});
  EXPECT_NE(flags.usage().find("--count V"), std::string::npos);
}

TEST(Flags, BooleansTakeAValueAsTheNextArgumentAndHelpShowsTheirForms) {
  bool eot = true, verbose = false;
  int64_t steps = 1;
  Flags flags("prog", "test");
  flags.add_bool("eot", &eot, "end-of-text tokens");
  flags.add_bool("verbose", &verbose, "more output");
  flags.add_int("steps", &steps, "steps");
  EXPECT_TRUE(flags.parse({"--eot", "false", "--verbose", "--steps", "4"}));
  EXPECT_FALSE(eot);
  EXPECT_TRUE(verbose);
  EXPECT_EQ(steps, 4);
  EXPECT_TRUE(flags.parse({"--eot", "on", "--verbose", "0"}));
  EXPECT_TRUE(eot);
  EXPECT_FALSE(verbose);
  // A word that is no boolean value stays an argument of its own, and is refused as one.
  expect_error([&] { flags.parse({"--eot", "maybe"}); }, ErrorKind::InvalidArgument, {"unexpected argument 'maybe'"});
  const std::string usage = flags.usage();
  EXPECT_NE(usage.find("--eot [true|false], --no-eot"), std::string::npos) << usage;
}

TEST(Flags, AnUnknownFlagNamesTheNearestKnownOne) {
  int64_t steps = 1, batch = 1;
  Flags flags("prog", "test");
  flags.add_int("steps", &steps, "steps");
  flags.add_int("batch", &batch, "batch");
  expect_error(
      [&] {
        flags.parse({"--step", "3"});
      },
      ErrorKind::InvalidArgument, {"unknown flag --step", "did you mean --steps?"});
  expect_error([&] { flags.parse({"--bacth=2"}); }, ErrorKind::InvalidArgument, {"did you mean --batch?"});
  // Nothing near: no suggestion.
  try {
    flags.parse({"--learning-rate", "3"});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).find("did you mean"), std::string::npos) << e.what();
  }
}

TEST(Rng, DeterministicUniformAndNormal) {
  Rng a(42), b(42), c(43);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(a.next_u64(), b.next_u64());
  EXPECT_NE(a.next_u64(), c.next_u64());
  Rng r(7);
  double sum = 0, sum2 = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const double x = r.normal();
    sum += x;
    sum2 += x * x;
  }
  EXPECT_NEAR(sum / n, 0.0, 0.01);
  EXPECT_NEAR(sum2 / n, 1.0, 0.02);
  std::set<uint64_t> seen;
  for (int i = 0; i < 1000; ++i) {
    const uint64_t v = r.below(10);
    ASSERT_LT(v, 10u);
    seen.insert(v);
  }
  EXPECT_EQ(seen.size(), 10u);
  const auto state = r.state();
  const uint64_t next = r.next_u64();
  r.set_state(state);
  EXPECT_EQ(r.next_u64(), next);
}

}  // namespace
}  // namespace lab
