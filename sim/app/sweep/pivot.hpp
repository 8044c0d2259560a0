#pragma once
/// `cpsim sweep --pivot KEY1,KEY2`: results.csv's step times as a compact terminal table, KEY1
/// down, KEY2 across (values in first-seen order); a cell with no ok row shows its status. Points
/// that differ in a further swept key are never merged into one cell: that key joins the
/// column label (KEY2/KEY3 values).
#include <string>
#include <vector>

namespace cpsim::app::sweep {

/// The table for results CSV `csv_path`; throws std::invalid_argument for a key that is not a
/// column (with a did-you-mean) or a spec that is not "KEY1,KEY2".
std::string pivot_table(const std::string& csv_path, const std::string& spec);

/// Checks "KEY1,KEY2" against a results CSV's header before the sweep runs; throws
/// std::invalid_argument as pivot_table does.
void validate_pivot(const std::string& spec, const std::vector<std::string>& header);


}  // namespace cpsim::app::sweep
