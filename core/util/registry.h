// A registry of named entries filled by static registrations before main (proposal
// sources, search strategies, estimator kinds): each entry has a `name` and an `order`,
// lists sort by order, then name; a repeated name is an internal error at start-up.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "core/util/error.h"

namespace basin {

template <class Entry>
class Registry {
 public:
  // `what` names the entries in the error of a repeated name ("proposal sources").
  explicit Registry(std::string what) : what_(std::move(what)) {}
  void add(Entry e) {
    BASIN_CHECK(!find(e.name)) << what_ << ": two registered as " << e.name;
    entries_.push_back(std::move(e));
  }
  const Entry* find(const std::string& name) const {
    for (const Entry& e : entries_)
      if (e.name == name) return &e;
    return nullptr;
  }
  std::vector<const Entry*> ordered() const {
    std::vector<const Entry*> out;
    for (const Entry& e : entries_) out.push_back(&e);
    std::stable_sort(out.begin(), out.end(), [](const Entry* a, const Entry* b) {
      return a->order != b->order ? a->order < b->order : a->name < b->name;
    });
    return out;
  }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const Entry* e : ordered()) out.push_back(e->name);
    return out;
  }

 private:
  std::string what_;
  std::vector<Entry> entries_;
};

}  // namespace basin
