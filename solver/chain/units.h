// units.h: byte counts, budgets and bandwidths as people type them ("4GiB", "60%",
// "16GB/s"), and byte counts as people read them ("1.50 GiB").
#pragma once

#include <cstdint>
#include <string>

namespace memopt::solver {

// "4GiB", "3.5GB", "512MiB", "4000000000", "4e9"; throws std::invalid_argument
// naming the text and listing the accepted forms.
int64_t parse_bytes(const std::string& text);
// parse_bytes, or a percentage of reference_bytes such as "60%"; always positive.
int64_t parse_budget(const std::string& text, int64_t reference_bytes);
// "16GB/s", "12.5GiB/s", "1e10" (bytes per second); positive and finite.
double parse_bandwidth(const std::string& text);
std::string format_bytes(int64_t bytes);  // "1.50 GiB", "512.0 KiB", "17 B"
// In powers of 1000, as links are quoted: "50.0 GB/s", "48.3 MB/s", "512 B/s".
std::string format_bandwidth(double bytes_per_s);

}  // namespace memopt::solver
