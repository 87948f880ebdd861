// A basin built without MPI (BASIN_WITH_MPI=OFF, or none found): a single rank runs as
// always; started by mpirun as one of several ranks, it refuses, as every rank would
// otherwise tune the whole run into the same records file.
#include "core/util/error.h"
#include "search/mpi.h"

namespace basin::search::mpi {

bool built_with_mpi() { return false; }

struct Session::Impl {};

std::unique_ptr<Session> Session::start_if_launched(Settings) {
  const int k = launched_ranks();
  if (k <= 1) return nullptr;
  throw Error("mpirun started " + std::to_string(k) +
              " ranks, but this basin was built without MPI (configure with -DBASIN_WITH_MPI=ON and "
              "libopenmpi-dev installed)");
}

Session::Session(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Session::~Session() = default;
int Session::rank() const { return 0; }
int Session::size() const { return 1; }
std::unique_ptr<Cluster> Session::cluster() { throw InternalError("no MPI"); }
int Session::serve() { throw InternalError("no MPI"); }

}  // namespace basin::search::mpi
