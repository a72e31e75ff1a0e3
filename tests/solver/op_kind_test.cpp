// op_kind_test.cpp: the op table of schedule.h -- one entry per kind, words that
// round-trip, nothing else accepted, and each kind's semantics.
//   ctest --test-dir build -R 'OpKind'
#include <set>
#include <string>
#include <string_view>

#include <gtest/gtest.h>

#include "solver/chain/schedule.h"

namespace memopt::solver {
namespace {

TEST(OpKind, TableIsConsistentAndWordsRoundTrip) {
  std::set<std::string_view> words;
  for (const OpKindInfo& k : kOpKinds) {
    EXPECT_EQ(info(k.kind).kind, k.kind);
    EXPECT_EQ(info(k.kind).word, k.word);
    EXPECT_EQ(op_kind_from_word(k.word), k.kind);
    EXPECT_TRUE(words.insert(k.word).second) << "duplicate word " << k.word;
  }
  EXPECT_EQ(words.size(), 14u);
  for (const OpKindInfo& k : kOpKinds) EXPECT_FALSE(k.is_compute && is_copy(k.kind)) << k.word;
  EXPECT_FALSE(info(OpKind::OffloadSaved).is_compute);
  EXPECT_FALSE(info(OpKind::PrefetchSaved).is_compute);
  EXPECT_EQ(op_kind_from_word("offload_saved"), OpKind::OffloadSaved);
  EXPECT_EQ(op_kind_from_word("offload_input"), OpKind::OffloadInput);
  EXPECT_TRUE(is_copy(OpKind::OffloadInput));
  EXPECT_TRUE(is_copy(OpKind::PrefetchInput));
  EXPECT_EQ(op_kind_from_word("offload_carried"), OpKind::OffloadCarried);
  EXPECT_TRUE(is_copy(OpKind::OffloadCarried));
  EXPECT_TRUE(is_copy(OpKind::PrefetchCarried));
  EXPECT_TRUE(info(OpKind::PrefetchInput).has_index);
  EXPECT_FALSE(info(OpKind::Loss).has_index);
  EXPECT_FALSE(info(OpKind::Offload).is_compute);
  EXPECT_FALSE(info(OpKind::Prefetch).is_compute);
  EXPECT_TRUE(info(OpKind::Bwd).is_compute);
  EXPECT_TRUE(is_copy(OpKind::PrefetchSaved));
  // A wait is neither: it moves nothing and computes nothing, but only the timeline
  // simulator knows it.
  EXPECT_FALSE(is_copy(OpKind::WaitOffloads));
  EXPECT_FALSE(info(OpKind::WaitOffloads).has_index);
  EXPECT_TRUE(needs_timeline(OpKind::WaitOffloads));
  EXPECT_FALSE(needs_timeline(OpKind::FwdDrop));
}

// Note [The semantics of an op kind]: what the table says of each kind, against the
// kinds written out by hand.
TEST(OpKind, TheTableSaysWhichWayEachCopyGoesWhatItMovesAndWhatUndoesIt) {
  const std::set<OpKind> offloads{OpKind::Offload, OpKind::OffloadSaved, OpKind::OffloadInput, OpKind::OffloadCarried};
  const std::set<OpKind> forwards{OpKind::FwdKeep, OpKind::FwdCkpt, OpKind::FwdDrop};
  for (const OpKindInfo& k : kOpKinds) {
    EXPECT_EQ(is_offload(k.kind), offloads.count(k.kind) == 1) << k.word;
    EXPECT_EQ(is_forward(k.kind), forwards.count(k.kind) == 1) << k.word;
    if (is_copy(k.kind)) {
      EXPECT_EQ(way_back(way_back(k.kind)), k.kind) << k.word;
      EXPECT_NE(info(way_back(k.kind)).direction, k.direction) << k.word;
      EXPECT_EQ(info(way_back(k.kind)).payload, k.payload) << k.word;
    } else {
      EXPECT_EQ(way_back(k.kind), k.kind) << k.word;
      EXPECT_EQ(k.payload, CopyPayload::None) << k.word;
    }
  }
  EXPECT_EQ(way_back(OpKind::Offload), OpKind::Prefetch);
  EXPECT_EQ(way_back(OpKind::OffloadSaved), OpKind::PrefetchSaved);
  EXPECT_EQ(way_back(OpKind::OffloadInput), OpKind::PrefetchInput);
  EXPECT_EQ(way_back(OpKind::OffloadCarried), OpKind::PrefetchCarried);
  EXPECT_EQ(info(OpKind::Prefetch).direction, CopyDirection::ToDevice);
  EXPECT_EQ(info(OpKind::OffloadSaved).payload, CopyPayload::SavedState);
  EXPECT_EQ(info(OpKind::PrefetchInput).payload, CopyPayload::OwnBytes);
  EXPECT_EQ(info(OpKind::OffloadCarried).payload, CopyPayload::EndingCarry);
  EXPECT_EQ(info(OpKind::WaitOffloads).direction, CopyDirection::None);
}

TEST(OpKind, UnknownWordsAreRejected) {
  EXPECT_EQ(op_kind_from_word("fwd"), std::nullopt);
  EXPECT_EQ(op_kind_from_word("FWD_KEEP"), std::nullopt);  // words are exact
  EXPECT_EQ(op_kind_from_word(""), std::nullopt);
  EXPECT_EQ(op_kind_from_word("loss "), std::nullopt);
}

TEST(OpKind, ToStringPrintsWordAndIndex) {
  EXPECT_EQ(to_string(Op{OpKind::FwdKeep, 3}), "fwd_keep 3");
  EXPECT_EQ(to_string(Op{OpKind::FwdCkpt, 0}), "fwd_ckpt 0");
  EXPECT_EQ(to_string(Op{OpKind::Loss, -1}), "loss");
  EXPECT_EQ(to_string(Op{OpKind::Prefetch, 12}), "prefetch 12");
  EXPECT_EQ(to_string(Op{OpKind::WaitOffloads, -1}), "wait_offloads");
}

}  // namespace
}  // namespace memopt::solver
