#include "app/command_errors.hpp"

#include <iostream>
#include <stdexcept>

#include "scenario/load.hpp"

namespace cpsim::app {

int report_errors(const std::string& who, const std::string& failed, const std::function<int()>& body) {
  try {
    return body();
  } catch (const scenario::InputError& e) {  // file:line:col already
    std::cerr << e.what() << "\n";
    return 2;
  } catch (const std::invalid_argument& e) {
    std::cerr << who << ": error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << who << ": " << failed << e.what() << "\n";
    return 1;
  }
}

}  // namespace cpsim::app
