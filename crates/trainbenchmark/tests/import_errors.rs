//! Bad model files give errors that name the file, the line and the reason.

use espalier_trainbenchmark::xmi;

fn fails(text: &str) -> String {
    xmi::read(text, "m.xmi").map(|_| ()).unwrap_err().to_string()
}

#[test]
fn bad_xmi_is_refused_with_its_place() {
    let head = "<?xml version=\"1.0\"?>\n<railway:RailwayContainer>\n";
    let cases = [
        (format!("{head}<regions id=\"1\"><sensors id=\"x\"/></regions>\n</railway:RailwayContainer>"), "m.xmi:3: id \"x\" is not a number"),
        (format!("{head}<routes id=\"2\" requires=\"//@regions.7/@sensors.0\"/>\n</railway:RailwayContainer>"), "m.xmi:3: requires: no element at //@regions.7/@sensors.0"),
        (format!("{head}<regions id=\"1\"><elements xsi:type=\"railway:Bridge\" id=\"3\"/></regions>\n</railway:RailwayContainer>"), "m.xmi:3: unknown track element type Some(\"railway:Bridge\")"),
        (format!("{head}<routes id=\"2\" active=\"maybe\"/>\n</railway:RailwayContainer>"), "m.xmi:3: active \"maybe\" is not a boolean"),
        (format!("{head}<regions id=\"1\">"), "the document ends inside an element"),
        (format!("{head}<regions id=\"1\"><elements xsi:type=\"railway:Segment\" id=\"3\" length=\"long\"/></regions></railway:RailwayContainer>"), "m.xmi:3: length \"long\" is not a number"),
    ];
    for (text, want) in cases {
        let got = fails(&text);
        assert!(got.contains(want), "got {got:?}, want {want:?}");
    }
}

#[test]
fn both_sides_of_monitoring_must_agree() {
    let text = "<?xml version=\"1.0\"?>\n<railway:RailwayContainer>\n<regions id=\"1\">\
        <sensors id=\"2\" monitors=\"//@regions.0/@elements.0\"/>\
        <elements xsi:type=\"railway:Segment\" id=\"3\"/></regions>\n</railway:RailwayContainer>";
    assert!(fails(text).contains("monitoredBy and monitors disagree"), "{}", fails(text));
}
