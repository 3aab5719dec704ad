//! The types whose text is a catalog object's name: the reg* family (regproc.c:
//! regprocout .. regcollationout) and aclitem (acl.c: aclitemout), printed from the
//! names the Python catalog stage resolved.
//!
//! Receives: a reg* datum (the 4-byte OID) or an aclitem datum (Oid ai_grantee, Oid
//! ai_grantor, AclMode ai_privs: 12 bytes on PostgreSQL 15, where AclMode is a uint32,
//! 16 from 16 on, a uint64; the datum's length tells which, as service.types.acl), and
//! `Names`, the cache the Python resolver fills (connectors.postgres.catalog_types
//! `CatalogNames`, through glue::names): per (what, OID) the exact text the Python
//! reference prints for it. For a reg* type that is what the server's output function
//! prints (service.types.regtypes.reg_text); for `Named::Role` what aclitemout prints
//! for a grantee or grantor (service.types.acl.role_text: the name quoted as putid
//! quotes it, or the OID of a role that is gone), so that no quoting rule is
//! re-implemented here. Hands on: the text, or `Err(reason)` naming the miss when a name
//! is not cached: the row is the Python path's, whose resolver then fills the cache, so
//! the next row with that OID is written here.
//!
//! The cache is only ever the Python cache's image: an entry is put when the Python
//! resolver resolves it and all are dropped when it is cleared (a catalog
//! invalidation), so a text read here is the one the Python path would print at the
//! same moment. Thread-safe (an RwLock: the snapshot's read-ahead encodes off the GIL);
//! never panics on any input.

use std::collections::HashMap;
use std::sync::RwLock;

use super::fixed;

/// A reg* type, by the output function that prints it (regproc.c).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reg {
    Proc,
    Procedure,
    Oper,
    Operator,
    Class,
    Type,
    Role,
    Namespace,
    Config,
    Dictionary,
    Collation,
}

impl Reg {
    /// The type's name (`regclass`): the kind connectors.avro.native_rows passes.
    pub fn parse(name: &str) -> Option<Reg> {
        Some(match name {
            "regproc" => Reg::Proc,
            "regprocedure" => Reg::Procedure,
            "regoper" => Reg::Oper,
            "regoperator" => Reg::Operator,
            "regclass" => Reg::Class,
            "regtype" => Reg::Type,
            "regrole" => Reg::Role,
            "regnamespace" => Reg::Namespace,
            "regconfig" => Reg::Config,
            "regdictionary" => Reg::Dictionary,
            "regcollation" => Reg::Collation,
            _ => return None,
        })
    }
}

/// What a cached text is the text of.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Named {
    /// A reg* value: what the type's output function prints for the OID.
    Reg(Reg),
    /// A role in an aclitem: what aclitemout prints for it.
    Role,
}

impl Named {
    /// The resolver's kind (service.types.regtypes.OidNames): a reg* output function
    /// (`regclassout`) or `role`.
    pub fn parse(kind: &str) -> Option<Named> {
        if kind == "role" {
            return Some(Named::Role);
        }
        Some(Named::Reg(Reg::parse(kind.strip_suffix("out")?)?))
    }
}

/// The names the Python resolver resolved (module docstring).
#[derive(Debug, Default)]
pub struct Names {
    /// (what, OID) -> the text printed for it; holds only what the Python resolver
    /// resolved since its cache was last cleared.
    texts: RwLock<HashMap<(Named, u32), String>>,
}

impl Names {
    pub fn put(&self, named: Named, oid: u32, text: String) {
        let mut texts = self.texts.write().unwrap_or_else(|e| e.into_inner());
        texts.insert((named, oid), text);
    }

    pub fn clear(&self) {
        self.texts
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }

    pub fn len(&self) -> usize {
        self.texts.read().unwrap_or_else(|e| e.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn get(&self, named: Named, oid: u32) -> Option<String> {
        let texts = self.texts.read().unwrap_or_else(|e| e.into_inner());
        texts.get(&(named, oid)).cloned()
    }

    /// Append the text of (named, oid) to `out`; false when it is not cached.
    fn write(&self, out: &mut String, named: Named, oid: u32) -> bool {
        let texts = self.texts.read().unwrap_or_else(|e| e.into_inner());
        match texts.get(&(named, oid)) {
            Some(text) => {
                out.push_str(text);
                true
            }
            None => false,
        }
    }
}

/// regclassout, regtypeout, ... (regproc.c) of a stored OID, as
/// service.types.regtypes.reg_text: the resolver's text.
pub fn reg_text(out: &mut String, names: &Names, reg: Reg, d: &[u8]) -> Result<(), &'static str> {
    let oid = u32::from_le_bytes(fixed(d)?);
    if names.write(out, Named::Reg(reg), oid) {
        Ok(())
    } else {
        Err("reg* name not cached")
    }
}

/// ACL_ALL_RIGHTS_STR (acl.h): each privilege bit's letter, in bit order.
const ACL_ALL_RIGHTS_STR: &[u8; 15] = b"arwdDxtXUCTcsAm";

/// aclitemout (acl.c), as service.types.acl.aclitem_text: `grantee=privs/grantor`, PUBLIC
/// (grantee 0) as nothing, each privilege's letter followed by `*` when grantable (the
/// grant option bits: the high 16 of a 15 AclMode, the high 32 from 16 on).
pub fn aclitem_text(out: &mut String, names: &Names, d: &[u8]) -> Result<(), &'static str> {
    let (privs, shift) = match d.len() {
        12 => (u32::from_le_bytes(fixed(&d[8..])?) as u64, 16),
        16 => (u64::from_le_bytes(fixed(&d[8..])?), 32),
        // the Python reference raises DecodeError naming the length
        _ => return Err("aclitem Python decides"),
    };
    let grantee = u32::from_le_bytes(fixed(&d[..4])?);
    let grantor = u32::from_le_bytes(fixed(&d[4..8])?);
    let start = out.len();
    let missed = |out: &mut String| {
        out.truncate(start);
        Err("aclitem role name not cached")
    };
    if grantee != 0 && !names.write(out, Named::Role, grantee) {
        return missed(out);
    }
    out.push('=');
    for (i, &letter) in ACL_ALL_RIGHTS_STR.iter().enumerate() {
        if privs & (1 << i) != 0 {
            out.push(letter as char);
            if privs & (1 << (i + shift)) != 0 {
                out.push('*');
            }
        }
    }
    out.push('/');
    if !names.write(out, Named::Role, grantor) {
        return missed(out);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acl15(grantee: u32, grantor: u32, privs: u32) -> Vec<u8> {
        [
            grantee.to_le_bytes(),
            grantor.to_le_bytes(),
            privs.to_le_bytes(),
        ]
        .concat()
    }

    #[test]
    fn kinds_parse_as_the_resolver_names_them() {
        assert_eq!(Named::parse("regclassout"), Some(Named::Reg(Reg::Class)));
        assert_eq!(
            Named::parse("regcollationout"),
            Some(Named::Reg(Reg::Collation))
        );
        assert_eq!(Named::parse("role"), Some(Named::Role));
        assert_eq!(Named::parse("regclass"), None);
        assert_eq!(Named::parse("textout"), None);
    }

    #[test]
    fn reg_text_is_the_cached_text_and_a_miss_is_a_fallback() {
        let names = Names::default();
        let mut out = String::new();
        let d = 1259u32.to_le_bytes();
        assert_eq!(
            reg_text(&mut out, &names, Reg::Class, &d),
            Err("reg* name not cached")
        );
        names.put(Named::Reg(Reg::Class), 1259, "pg_class".into());
        // another reg type of the same OID is another name
        assert!(reg_text(&mut out, &names, Reg::Type, &d).is_err());
        reg_text(&mut out, &names, Reg::Class, &d).unwrap();
        assert_eq!(out, "pg_class");
        assert!(reg_text(&mut out, &names, Reg::Class, &d[..3]).is_err());
        names.clear();
        assert!(names.is_empty());
    }

    #[test]
    fn aclitem_text_in_both_layouts() {
        let names = Names::default();
        names.put(Named::Role, 10, "postgres".into());
        names.put(Named::Role, 20, "\"a b\"".into());
        let mut out = String::new();
        // PUBLIC, SELECT (bit 1) with grant option on 15 (bit 17), INSERT (bit 0)
        aclitem_text(&mut out, &names, &acl15(0, 10, 0b11 | 1 << 17)).unwrap();
        assert_eq!(out, "=ar*/postgres");
        out.clear();
        let privs: u64 = 1 << 14 | 1 << 46 | 1 << 2;
        let d16 = [20u32.to_le_bytes(), 10u32.to_le_bytes()].concat();
        aclitem_text(
            &mut out,
            &names,
            &[d16, privs.to_le_bytes().to_vec()].concat(),
        )
        .unwrap();
        assert_eq!(out, "\"a b\"=wm*/postgres");
        out.clear();
        out.push_str("kept");
        assert_eq!(
            aclitem_text(&mut out, &names, &acl15(30, 10, 1)),
            Err("aclitem role name not cached")
        );
        assert_eq!(
            aclitem_text(&mut out, &names, &acl15(10, 30, 1)),
            Err("aclitem role name not cached")
        );
        assert_eq!(out, "kept");
        assert!(aclitem_text(&mut out, &names, &[0; 13]).is_err());
    }
}
