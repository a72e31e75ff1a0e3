// units.cpp: a number and an optional unit, split and checked once for every quantity.
#include "solver/chain/units.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string_view>

namespace memopt::solver {
namespace {

std::string trim(std::string_view s) {
  const auto not_space = [](unsigned char c) { return !std::isspace(c); };
  const auto b = std::find_if(s.begin(), s.end(), not_space);
  const auto e = std::find_if(s.rbegin(), s.rend(), not_space).base();
  return b < e ? std::string(b, e) : std::string();
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

struct ByteUnit {
  std::string_view word;  // lower case
  int64_t multiplier;
};
constexpr ByteUnit kByteUnits[] = {
    {"", 1},
    {"b", 1},
    {"kb", 1000},
    {"mb", 1000 * 1000},
    {"gb", int64_t{1000} * 1000 * 1000},
    {"tb", int64_t{1000} * 1000 * 1000 * 1000},
    {"kib", int64_t{1} << 10},
    {"mib", int64_t{1} << 20},
    {"gib", int64_t{1} << 30},
    {"tib", int64_t{1} << 40},
};

constexpr const char* kBytesForms =
    "write a byte count such as 4000000000, 4e9, 512MiB, 3.5GB or 4GiB (B, KB, MB, GB, TB count in powers of "
    "1000; KiB, MiB, GiB, TiB in powers of 1024; units ignore case)";

// A number followed by an optional unit, as typed: "3.5 GB", "4e9", "512MiB".
struct Quantity {
  std::string text;       // trimmed, for messages
  std::string number;     // the numeric part as written
  double value = 0;
  std::string unit_text;  // the unit as written, for messages
  std::string unit;       // lower case
};

Quantity split_quantity(const std::string& raw, const char* forms) {
  Quantity q;
  q.text = trim(raw);
  if (q.text.empty()) throw std::invalid_argument("empty; " + std::string(forms));
  const char* begin = q.text.data();
  const char* end = begin + q.text.size();
  const auto [ptr, ec] = std::from_chars(begin, end, q.value, std::chars_format::general);
  if (ec == std::errc::result_out_of_range)
    throw std::invalid_argument("'" + q.text + "' is out of range; " + std::string(forms));
  if (ec != std::errc() || ptr == begin)
    throw std::invalid_argument("'" + q.text + "' does not start with a number; " + forms);
  q.number.assign(begin, ptr);
  q.unit_text = trim(std::string_view(ptr, static_cast<size_t>(end - ptr)));
  q.unit = lower(q.unit_text);
  if (!std::isfinite(q.value)) throw std::invalid_argument("'" + q.text + "' is not a finite number; " + forms);
  if (q.value < 0 || (q.value == 0 && std::signbit(q.value)))
    throw std::invalid_argument("'" + q.text + "' is negative; " + std::string(forms));
  return q;
}

const ByteUnit* find_byte_unit(const std::string& unit) {
  for (const ByteUnit& u : kByteUnits)
    if (u.word == unit) return &u;
  return nullptr;
}

// A plain decimal such as "33.3" as the exact fraction 333/10, so that 33.3% of
// 1000 bytes is 333 and not 332 (33.3 is 33.29999... as a double).
struct Decimal {
  __int128 num = 0;
  __int128 den = 1;
};

std::optional<Decimal> exact_decimal(std::string_view text) {
  Decimal d;
  int digits = 0;
  bool point = false;
  for (const char ch : text) {
    if (ch == '.' && !point) {
      point = true;
    } else if (ch >= '0' && ch <= '9') {
      // 19 digits hold every int64; beyond that the double path is precise enough.
      if (++digits > 19) return std::nullopt;
      d.num = d.num * 10 + (ch - '0');
      if (point) d.den *= 10;
    } else {
      return std::nullopt;  // exponent forms such as 4e9
    }
  }
  if (digits == 0) return std::nullopt;
  return d;
}

}  // namespace

int64_t parse_bytes(const std::string& text) {
  const Quantity q = split_quantity(text, kBytesForms);
  const ByteUnit* unit = find_byte_unit(q.unit);
  if (!unit) throw std::invalid_argument("'" + q.text + "' has an unknown unit '" + q.unit_text + "'; " + kBytesForms);
  const std::string too_large = "'" + q.text + "' is more than the largest 64-bit byte count (8 EiB)";
  const std::string fractional = "'" + q.text + "' is not a whole number of bytes";
  constexpr auto kMax = std::numeric_limits<int64_t>::max();
  // 0.1KiB is 102.4 bytes: both paths round down, so a budget never exceeds what was asked for.
  if (const auto d = exact_decimal(q.number)) {
    const __int128 scaled = d->num * unit->multiplier;
    if (unit->multiplier == 1 && scaled % d->den != 0) throw std::invalid_argument(fractional);
    const __int128 bytes = scaled / d->den;
    if (bytes > kMax) throw std::invalid_argument(too_large);
    return static_cast<int64_t>(bytes);
  }
  const long double bytes = static_cast<long double>(q.value) * unit->multiplier;
  if (unit->multiplier == 1 && bytes != std::floor(bytes)) throw std::invalid_argument(fractional);
  if (bytes >= 0x1p63L) throw std::invalid_argument(too_large);  // 2^63: above every int64
  return static_cast<int64_t>(std::floor(bytes));
}

int64_t parse_budget(const std::string& text, int64_t reference_bytes) {
  const std::string t = trim(text);
  if (!t.empty() && t.back() == '%') {
    const std::string forms = "a percentage budget is above 0% and at most 1000%, such as 60%";
    const Quantity q = split_quantity(t.substr(0, t.size() - 1), forms.c_str());
    if (!q.unit.empty()) throw std::invalid_argument("'" + t + "' is not a percentage; " + forms);
    if (q.value <= 0 || q.value > 1000) throw std::invalid_argument("'" + t + "' is out of range; " + forms);
    if (reference_bytes <= 0)
      throw std::invalid_argument("'" + t + "' is a percentage of " + std::to_string(reference_bytes) +
                                  " bytes; give the budget in bytes instead");
    long double bytes = std::floor(static_cast<long double>(reference_bytes) * q.value / 100.0L);
    if (const auto d = exact_decimal(q.number))
      bytes = static_cast<long double>(static_cast<__int128>(reference_bytes) * d->num / (d->den * 100));
    if (bytes >= 0x1p63L)
      throw std::invalid_argument("'" + t + "' of " + std::to_string(reference_bytes) +
                                  " bytes is more than the largest 64-bit byte count (8 EiB)");
    if (bytes < 1)
      throw std::invalid_argument("'" + t + "' of " + std::to_string(reference_bytes) + " bytes is less than one byte");
    return static_cast<int64_t>(bytes);
  }
  int64_t bytes = 0;
  try {
    bytes = parse_bytes(t);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string(e.what()) + "; or a percentage such as 60%");
  }
  if (bytes <= 0) throw std::invalid_argument("'" + t + "' is not a positive budget");
  return bytes;
}

double parse_bandwidth(const std::string& text) {
  const char* forms =
      "write bytes per second such as 16GB/s, 12.5GiB/s or 1e10 (B, KB, MB, GB, TB count in powers of 1000; "
      "KiB, MiB, GiB, TiB in powers of 1024; units ignore case)";
  const Quantity q = split_quantity(text, forms);
  std::string unit = q.unit;
  if (unit.ends_with("/s") && unit.size() > 2) unit.erase(unit.size() - 2);
  const ByteUnit* u = unit.empty() ? nullptr : find_byte_unit(unit);
  if (!q.unit.empty() && !u)
    throw std::invalid_argument("'" + q.text + "' has an unknown unit '" + q.unit_text + "'; " + forms);
  const double bytes_per_s = q.value * static_cast<double>(u ? u->multiplier : 1);
  if (!(bytes_per_s > 0) || !std::isfinite(bytes_per_s))
    throw std::invalid_argument("'" + q.text + "' is not a positive finite bandwidth; " + forms);
  return bytes_per_s;
}

std::string format_bytes(int64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  constexpr int kLast = static_cast<int>(std::size(kUnits)) - 1;
  if (bytes > -1024 && bytes < 1024) return std::to_string(bytes) + " B";
  const char* sign = bytes < 0 ? "-" : "";
  double v = std::fabs(static_cast<double>(bytes));
  int u = 0;
  while (v >= 1024 && u < kLast) {
    v /= 1024;
    ++u;
  }
  // 1023.96 KiB would print as "1024.0 KiB"; carry into the next unit instead.
  if (v >= 1023.95 && u < kLast) {
    v /= 1024;
    ++u;
  }
  char buf[48];
  std::snprintf(buf, sizeof buf, v < 10 ? "%s%.2f %s" : "%s%.1f %s", sign, v, kUnits[u]);
  return buf;
}

std::string format_bandwidth(double bytes_per_s) {
  static constexpr const char* kUnits[] = {"B/s", "kB/s", "MB/s", "GB/s", "TB/s"};
  constexpr int kLast = static_cast<int>(std::size(kUnits)) - 1;
  double v = bytes_per_s;
  int u = 0;
  while (std::fabs(v) >= 999.95 && u < kLast) {
    v /= 1000;
    ++u;
  }
  char buf[48];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, kUnits[u]);
  return buf;
}

}  // namespace memopt::solver
