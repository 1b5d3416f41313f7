// Generates tests/common/text/fixtures/gpt2_tricky_strings.json: tricky strings and the ids a reference
// GPT-2 tokenizer gives them. The C++ tokenizer test must reproduce every one.
//
// Reference: js-tiktoken's "gpt2" encoding, cross-checked string by string against gpt-3-encoder (a port of
// OpenAI's encoder.py); the script stops if the two ever disagree, or if they miss the known facts
// ("Hello world" -> [15496, 995]; data/tinyshakespeare.txt -> 338,025 tokens).
//
// Both libraries run the pattern on JavaScript's regex engine, whose \s differs from the Unicode White_Space
// property of the original tokenizer on two characters (U+0085 and U+FEFF), so those stay out of the fixture;
// tests/common/text/test_pretokenizer.cpp covers them by hand.
//
// To regenerate (from the repository root; the npm registry must be reachable):
//   cd tools/tokenizer_fixture && npm install && node generate.mjs
// node_modules/ is git-ignored; commit package.json, package-lock.json and the regenerated JSON.
import { getEncoding } from "js-tiktoken";
import gpt3 from "gpt-3-encoder";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const output = path.join(repo, "tests/common/text/fixtures/gpt2_tricky_strings.json");

const cases = [
  ["hello", "Hello world"],
  ["contractions", "I'm sure you're right, we've said they'll go; he'd know it's done, can't stop."],
  ["uppercase contractions", "I'M SURE YOU'RE RIGHT, HE'S HERE, IT'S DONE, DON'T'S 'S 'T 'RE 'VE 'M 'LL 'D"],
  ["apostrophe runs", "'s's''' ''tis rock'n'roll O'Neil's ?'s 'x ' '"],
  ["curly apostrophe", "don\u2019t won\u2019t it\u2019s"],
  ["digits", "0 1 12 123 1234 12345 3.14159 1,000,000 2026-11-21 10:45pm v2.0.1"],
  ["long number", "99999999999999999999999999999999999999 1234567890123456789012345678901234567890"],
  ["other numbers", "\u0663\u0664\u0665 \u00b2\u00b3 \u216b \u00bd \u2460\u2461 \u0967\u0968\u0969"],
  ["space runs", "a  b   c    d     e          f"],
  ["tabs", "tab\tsep\t\tdouble\t \tmixed\t"],
  ["newlines", "line1\nline2\n\nline4\n\n\nline7\n"],
  ["trailing whitespace", "trailing spaces   "],
  ["leading whitespace", "   leading spaces"],
  ["only whitespace", " \n \n \t  \n\n"],
  ["windows newlines", "\r\n\r\nwindows\r\nline\r\n"],
  ["unicode spaces", "nbsp\u00a0here ideographic\u3000space em\u2003space \u2028\u2029 \u000b\u000c end"],
  ["space before unicode space", "a \u00a0b  \u3000c"],
  ["punctuation runs", "Hello!!! What?!?! ... --- *** ### @@@ $$$ %%% ^^^ ~~~ ___"],
  ["brackets", "(parens) [brackets] {braces} <angles> \"quotes\""],
  ["code", "#include <iostream>\nint main() { x += y->z; return 0; } // comment\n"],
  ["url", "http://example.com/path?q=1&r=2#frag user@example.org"],
  ["emoji", "\u{1F600}\u{1F603}\u{1F604} smile \u{1F600} ok"],
  ["zwj family", "\u{1F468}\u200d\u{1F469}\u200d\u{1F467}\u200d\u{1F466} family"],
  ["skin tone", "\u{1F44D}\u{1F3FD} thumbs \u{1F44B}\u{1F3FF}"],
  ["rainbow flag", "\u{1F3F3}\ufe0f\u200d\u{1F308} flag"],
  ["regional indicators", "\u{1F1FA}\u{1F1F8}\u{1F1EF}\u{1F1F5} flags"],
  ["chinese", "\u4e2d\u6587\u5206\u8bcd\u6d4b\u8bd5\u3002\u4f60\u597d\uff0c\u4e16\u754c\uff01"],
  ["japanese", "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\u3001\u30ab\u30bf\u30ab\u30ca\u3068\u3072\u3089\u304c\u306a"],
  ["korean", "\ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8"],
  ["accented latin", "caf\u00e9 na\u00efve r\u00e9sum\u00e9 Z\u00fcrich \u00c6r\u00f8sk\u00f8bing fa\u00e7ade \u00c5ngstr\u00f6m"],
  ["decomposed accents", "cafe\u0301 nai\u0308ve A\u030angstro\u0308m"],
  ["combining marks", "a\u0300\u0301\u0302 Z\u0324\u0354\u0367\u0311\u0313a\u0356\u032d\u0308\u0307l\u036e\u0312\u036bg\u030c\u0317\u035a\u031ao"],
  ["arabic", "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645"],
  ["hindi", "\u0928\u092e\u0938\u094d\u0924\u0947 \u0926\u0941\u0928\u093f\u092f\u093e"],
  ["hebrew", "\u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd"],
  ["cyrillic", "\u041f\u0440\u0438\u0432\u0435\u0442 \u043c\u0438\u0440"],
  ["greek", "\u0393\u03b5\u03b9\u03ac \u03c3\u03bf\u03c5 \u03ba\u03cc\u03c3\u03bc\u03b5"],
  ["zero width", "zero\u200bwidth\u200cnon\u200djoiner"],
  ["control characters", "\u0000\u0001 bell\u0007 \u001f\u007f del"],
  ["end of text as plain text", "a<|endoftext|>b"],
  ["long word", "a".repeat(200)],
  ["long space run", "x" + " ".repeat(50) + "y"],
  ["mixed", "GPT-2's 1st run cost $1,000.50 (approx.) \u2014 \u201cquoted\u201d \u2018single\u2019 \u00abguillemets\u00bb \u2026 \u{1F600} \u4e2d\u6587 caf\u00e9\n\n  end  "],
];

const tiktoken = getEncoding("gpt2");
const encode = (text) => tiktoken.encode(text, [], []);  // special tokens are plain text, as in encoder.py

function check(what, actual, expected) {
  if (JSON.stringify(actual) !== JSON.stringify(expected)) {
    throw new Error(`${what}: got ${JSON.stringify(actual)}, expected ${JSON.stringify(expected)}`);
  }
}

check("Hello world", encode("Hello world"), [15496, 995]);
const corpus = fs.readFileSync(path.join(repo, "data/tinyshakespeare.txt"), "utf8");
check("tinyshakespeare token count", encode(corpus).length, 338025);

const lines = cases.map(([name, text]) => {
  const ids = encode(text);
  check(`gpt-3-encoder on "${name}"`, gpt3.encode(text), ids);
  check(`round trip of "${name}"`, tiktoken.decode(ids), text);
  return "    " + JSON.stringify({ name, text, ids });
});

const version = (pkg) => JSON.parse(fs.readFileSync(path.join(repo, "tools/tokenizer_fixture/node_modules", pkg,
                                                                "package.json"), "utf8")).version;
const header = {
  generated_by: "tools/tokenizer_fixture/generate.mjs",
  reference: `js-tiktoken ${version("js-tiktoken")} (gpt2), checked against gpt-3-encoder ${version("gpt-3-encoder")}`,
};
const json = "{\n" + Object.entries(header).map(([k, v]) => `  ${JSON.stringify(k)}: ${JSON.stringify(v)},\n`).join("") +
             `  "cases": [\n${lines.join(",\n")}\n  ]\n}\n`;
fs.mkdirSync(path.dirname(output), { recursive: true });
fs.writeFileSync(output, json);
console.log(`wrote ${cases.length} cases to ${path.relative(repo, output)}`);
