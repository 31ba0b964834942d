"""Characters that read as one ASCII letter or digit, from Unicode's confusables data.

Derived from confusables.txt of Unicode Technical Standard #39 (Unicode Security
Mechanisms), version 17.0.0 (dated 2025-07-22): every single code point whose prototype is
one ASCII letter or digit, less those Python's NFKC already folds to ASCII (fullwidth and
mathematical letters, which sagacity.text._lookalikes catches by NFKC) and those unassigned in
Python's own Unicode database. Each item below is the character, written as an escape (so
this file is not itself confusable), followed by the ASCII character it passes for: the
Latin script g (U+0261) for "g", Cherokee letters for "P", "A", "Y", "L" and so on.

Used for warnings only (worker.confusables, the inbox, the CLI): the skeleton that the
saga's same-person checks compare (sagacity.text._lookalikes.skeleton) keeps its own table,
since widening it would change a decision a recorded workflow history already holds.
"""

from __future__ import annotations

__all__ = ["UTS39_ASCII", "UTS39_VERSION"]

UTS39_VERSION = "17.0.0"

_PAIRS = (
    "\u00d7x\u00fep\u0131i\u0184b\u018dg\u0192f\u0196l\u01a6R\u01a72\u01b73\u01bc5\u01bds"
    "\u01bfp\u01c0l\u021c3\u02228\u02238\u0251a\u0261g\u0263y\u0269i\u026ai\u026fw\u028bu"
    "\u028fy\u02dbi\u037ai\u037fJ\u0391A\u0392B\u0395E\u0396Z\u0397H\u0399l\u039aK\u039cM"
    "\u039dN\u039fO\u03a1P\u03a4T\u03a5Y\u03a7X\u03b1a\u03b3y\u03b9i\u03bdv\u03bfo\u03c1p"
    "\u03c3o\u03c5u\u03d2Y\u03dcF\u03e82\u03ec6\u03edo\u03f1p\u03f2c\u03f3j\u03f8p\u03f9C"
    "\u03faM\u0405S\u0406l\u0408J\u0410A\u0412B\u0415E\u04173\u041aK\u041cM\u041dH\u041eO"
    "\u0420P\u0421C\u0422T\u0423Y\u0425X\u042cb\u0430a\u04316\u0433r\u0435e\u043eo\u0440p"
    "\u0441c\u0443y\u0445x\u0448w\u0455s\u0456i\u0458j\u0461w\u0474V\u0475v\u04aeY\u04afy"
    "\u04bbh\u04bde\u04c0l\u04cfl\u04e03\u0501d\u050cG\u051bq\u051cW\u051dw\u054dU\u054fS"
    "\u0555O\u0561w\u0563q\u0566q\u0570h\u0578n\u057cn\u057du\u0581g\u0582i\u0584f\u0585o"
    "\u05c0l\u05d5l\u05d8v\u05dfl\u05e1o\u0627l\u0647o\u0661l\u0665o\u0667V\u06beo\u06c1o"
    "\u06d5o\u06f1l\u06f5o\u06f7V\u07c0O\u07cal\u0966o\u09693\u09e6o\u09ea8\u09ed9\u0a66o"
    "\u0a679\u0a6a8\u0ae6o\u0ae93\u0b038\u0b20O\u0b66o\u0b689\u0be6o\u0c02o\u0c66o\u0c82o"
    "\u0ce6O\u0d02o\u0d1fs\u0d20o\u0d66o\u0d6d9\u0d82o\u0e50o\u0ed0o\u1004c\u101do\u1040o"
    "\u105ac\u10e7y\u10ffo\u1200U\u12d0O\u13a0D\u13a1R\u13a2T\u13a5i\u13a9Y\u13aaA\u13abJ"
    "\u13acE\u13b3W\u13b7M\u13bbH\u13bdY\u13c0G\u13c2h\u13c3Z\u13ce4\u13cfb\u13d2R\u13d4W"
    "\u13d5S\u13d9V\u13daS\u13deL\u13dfC\u13e2P\u13e6K\u13e7d\u13ee6\u13f3G\u13f4B\u142fV"
    "\u144cU\u146dP\u146fd\u1472b\u148dJ\u14aaL\u14bf2\u1541x\u157cH\u157dx\u1587R\u15afb"
    "\u15b4F\u15c5A\u15deD\u15eaD\u15f0M\u15f7B\u166dX\u166ex\u16b7X\u16c1l\u16d5K\u16d6M"
    "\u17e0o\u1d04c\u1d0fo\u1d11o\u1d1cu\u1d20v\u1d21w\u1d22z\u1d26r\u1d83g\u1d8cy\u1e9df"
    "\u1effy\u1fbei\u212ee\u213dy\u2223l\u2228v\u222aU\u22a4T\u22c1v\u22c3U\u22ffE\u2373i"
    "\u2374p\u237aa\u23fdl\u2573X\u27d9T\u292bx\u292cx\u2a2fx\u2c82B\u2c85r\u2c8eH\u2c92l"
    "\u2c93i\u2c94K\u2c98M\u2c9aN\u2c9c3\u2c9eO\u2c9fo\u2ca2P\u2ca3p\u2ca4C\u2ca5c\u2ca6T"
    "\u2ca8Y\u2ca9y\u2cacX\u2cbdw\u2cc43\u2cca9\u2ccb9\u2ccc3\u2cceP\u2ccfp\u2cd0L\u2cd26"
    "\u2cd36\u2cdc6\u2d38V\u2d39E\u2d4fl\u2d54O\u2d55Q\u2d5dX\u3007O\ua4d0B\ua4d1P\ua4d2d"
    "\ua4d3D\ua4d4T\ua4d6G\ua4d7K\ua4d9J\ua4daC\ua4dcZ\ua4ddF\ua4dfM\ua4e0N\ua4e1L\ua4e2S"
    "\ua4e3R\ua4e6V\ua4e7H\ua4eaW\ua4ebX\ua4ecY\ua4eeA\ua4f0E\ua4f2l\ua4f3O\ua4f4U\ua6442"
    "\ua647i\ua6dfV\ua6ef2\ua731s\ua75a2\ua76a3\ua76e9\ua798F\ua799f\ua79fu\ua7ab3\ua7b2J"
    "\ua7b3X\ua7b4B\uab32e\uab35f\uab3do\uab47r\uab48r\uab4eu\uab52u\uab5ay\uab75i\uab81r"
    "\uab83w\uab93z\uaba9v\uabaas\uabafc\ufba6o\ufba7o\ufba8o\ufba9o\ufbaao\ufbabo\ufbaco"
    "\ufbado\ufe8dl\ufe8el\ufee9o\ufeeao\ufeebo\ufeeco\uffe8l\U00010282B\U00010286E"
    "\U00010287F\U0001028al\U00010290X\U00010292O\U00010295P\U00010296S\U00010297T"
    "\U000102a0A\U000102a1B\U000102a2C\U000102a5F\U000102abO\U000102b0M\U000102b1T"
    "\U000102b2Y\U000102b4X\U000102cfH\U000102f5Z\U00010301B\U00010302C\U00010309l"
    "\U00010311M\U00010315T\U00010317X\U0001031a8\U00010320l\U00010322X\U00010404O"
    "\U00010415C\U0001041bL\U00010420S\U0001042co\U0001043dc\U00010448s\U000104b4R"
    "\U000104c2O\U000104ceU\U000104d27\U000104eao\U000104f6u\U00010513N\U00010516O"
    "\U00010518K\U0001051cC\U0001051dV\U00010525F\U00010526L\U00010527X\U000114d0o"
    "\U00011706v\U0001170aw\U0001170ew\U0001170fw\U000118a0V\U000118a2F\U000118a3L"
    "\U000118a4Y\U000118a6E\U000118a9Z\U000118ac9\U000118aeE\U000118af4\U000118b2L"
    "\U000118b5O\U000118b8U\U000118bb5\U000118bcT\U000118c0v\U000118c1s\U000118c2F"
    "\U000118c3i\U000118c4z\U000118c67\U000118c8o\U000118ca3\U000118cc9\U000118d56"
    "\U000118d69\U000118d7o\U000118d8u\U000118dcy\U000118e0O\U000118e5Z\U000118e6W"
    "\U000118e9C\U000118ecX\U000118efW\U000118f2C\U00016f08V\U00016f0aT\U00016f16L"
    "\U00016f28l\U00016f35R\U00016f3aS\U00016f3b3\U00016f40A\U00016f42U\U00016f43Y"
    "\U0001d2063\U0001d20dV\U0001d2127\U0001d213F\U0001d216R\U0001d22aL\U0001d6a4i"
    "\U0001d6a8A\U0001d6a9B\U0001d6acE\U0001d6adZ\U0001d6aeH\U0001d6b0l\U0001d6b1K"
    "\U0001d6b3M\U0001d6b4N\U0001d6b6O\U0001d6b8P\U0001d6bbT\U0001d6bcY\U0001d6beX"
    "\U0001d6c2a\U0001d6c4y\U0001d6cai\U0001d6cev\U0001d6d0o\U0001d6d2p\U0001d6d4o"
    "\U0001d6d6u\U0001d6e0p\U0001d6e2A\U0001d6e3B\U0001d6e6E\U0001d6e7Z\U0001d6e8H"
    "\U0001d6eal\U0001d6ebK\U0001d6edM\U0001d6eeN\U0001d6f0O\U0001d6f2P\U0001d6f5T"
    "\U0001d6f6Y\U0001d6f8X\U0001d6fca\U0001d6fey\U0001d704i\U0001d708v\U0001d70ao"
    "\U0001d70cp\U0001d70eo\U0001d710u\U0001d71ap\U0001d71cA\U0001d71dB\U0001d720E"
    "\U0001d721Z\U0001d722H\U0001d724l\U0001d725K\U0001d727M\U0001d728N\U0001d72aO"
    "\U0001d72cP\U0001d72fT\U0001d730Y\U0001d732X\U0001d736a\U0001d738y\U0001d73ei"
    "\U0001d742v\U0001d744o\U0001d746p\U0001d748o\U0001d74au\U0001d754p\U0001d756A"
    "\U0001d757B\U0001d75aE\U0001d75bZ\U0001d75cH\U0001d75el\U0001d75fK\U0001d761M"
    "\U0001d762N\U0001d764O\U0001d766P\U0001d769T\U0001d76aY\U0001d76cX\U0001d770a"
    "\U0001d772y\U0001d778i\U0001d77cv\U0001d77eo\U0001d780p\U0001d782o\U0001d784u"
    "\U0001d78ep\U0001d790A\U0001d791B\U0001d794E\U0001d795Z\U0001d796H\U0001d798l"
    "\U0001d799K\U0001d79bM\U0001d79cN\U0001d79eO\U0001d7a0P\U0001d7a3T\U0001d7a4Y"
    "\U0001d7a6X\U0001d7aaa\U0001d7acy\U0001d7b2i\U0001d7b6v\U0001d7b8o\U0001d7bap"
    "\U0001d7bco\U0001d7beu\U0001d7c8p\U0001d7caF\U0001e8c7l\U0001e8cb8\U0001ee00l"
    "\U0001ee24o\U0001ee64o\U0001ee80l\U0001ee84o\U0001f74cC\U0001f768T"
)  # fmt: skip


def _pairs(text: str) -> dict[str, str]:
    return {text[i]: text[i + 1] for i in range(0, len(text), 2)}


UTS39_ASCII: dict[str, str] = _pairs(_PAIRS)
"""A character -> the ASCII letter or digit that confusables.txt says it passes for."""
