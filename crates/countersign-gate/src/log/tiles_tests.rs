use super::*;
use crate::error::ErrorCode;

fn tile(level: u8, index: u64, width: u16) -> LogResource {
    LogResource::Tile(TileAt {
        level,
        index,
        width,
    })
}

/// The specification's own examples, and the forms around them.
#[test]
fn paths_read_as_the_specification_writes_them() {
    for (path, resource) in [
        ("checkpoint", LogResource::Checkpoint),
        ("tile/0/000", tile(0, 0, 256)),
        ("tile/0/x001/x234/067", tile(0, 1_234_067, 256)),
        ("tile/1/000.p/17", tile(1, 0, 17)),
        ("tile/2/000.p/1", tile(2, 0, 1)),
        ("tile/0/272.p/112", tile(0, 272, 112)),
        (
            "tile/entries/x001/234",
            LogResource::Entries(TileAt {
                level: 0,
                index: 1234,
                width: 256,
            }),
        ),
        (
            "tile/entries/000.p/255",
            LogResource::Entries(TileAt {
                level: 0,
                index: 0,
                width: 255,
            }),
        ),
    ] {
        assert_eq!(LogResource::parse(path).expect(path), resource, "{path}");
        assert_eq!(resource.path(), path);
    }
}

#[test]
fn anything_else_is_refused_without_a_panic() {
    for bad in [
        "",
        "checkpoint/",
        "tile",
        "tile/",
        "tile/0",
        "tile/0/",
        "tile/0/1",
        "tile/0/0001",
        "tile/00/000",
        "tile/01/000",
        "tile/8/000",
        "tile/64/000",
        "tile/-1/000",
        "tile/0/000.p/0",
        "tile/0/000.p/256",
        "tile/0/000.p/01",
        "tile/0/000.p/",
        "tile/0/x000/001",
        "tile/0/001/002",
        "tile/0/y001/002",
        "tile/0/x001/x002",
        "tile/0/x999/x999/x999/x999/x999/x999/x999/999",
        "tile/data/000",
        "tile/entries/",
        "tile/entries/1",
        "tile/0/+01",
        "tile/0/０００",
        "/tile/0/000",
        "tile/0/000/",
    ] {
        let err = LogResource::parse(bad).expect_err(bad);
        assert_eq!(err.code(), ErrorCode::InvalidArgument, "{bad}");
    }
}

/// The specification's example: a tree of 70,000 records has 273 full level-0 tiles, a
/// partial one of 112, one full level-1 tile, a partial one of 17 and a level-2 tile of 1.
#[test]
fn a_tree_holds_the_tiles_the_specification_lists() {
    let size = 70_000;
    let at = |level, index, width| TileAt {
        level,
        index,
        width,
    };
    for held in [
        at(0, 0, 256),
        at(0, 272, 256),
        at(0, 273, 112),
        at(0, 273, 1),
        at(1, 0, 256),
        at(1, 1, 17),
        at(2, 0, 1),
    ] {
        assert!(held.within(size), "{held:?}");
    }
    for missing in [
        at(0, 273, 256),
        at(0, 273, 113),
        at(0, 274, 1),
        at(1, 1, 18),
        at(2, 0, 2),
        at(3, 0, 1),
        at(7, 0, 1),
        at(0, u64::MAX, 256),
    ] {
        assert!(!missing.within(size), "{missing:?}");
    }
    // A tree of 256 has a full level-0 tile and a level-1 tile of width 1.
    assert!(at(0, 0, 256).within(256));
    assert!(at(1, 0, 1).within(256));
    assert!(!at(0, 1, 1).within(256));
}
